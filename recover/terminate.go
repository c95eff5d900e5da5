package recover

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/ownerjournal/ownerjournal/owner"
	"golang.org/x/sys/unix"
)

// terminate opens a verified handle on id and ends it with [Terminate].
func terminate(ctx context.Context, id owner.Identity, group bool, grace time.Duration) ([]string, error) {
	p, err := owner.Open(id)
	switch {
	case errors.Is(err, owner.ErrGone):
		return []string{fmt.Sprintf("pid %d already gone", id.PID)}, nil
	case err != nil:
		return nil, err
	}
	defer p.Close()
	return Terminate(ctx, p, group, grace)
}

// killWait is the least time Terminate waits for an exit after SIGKILL.
var killWait = 20 * time.Second

// Terminate ends the process behind a verified handle (its whole process
// group when group is set; p must then be the leader's handle, which reaches
// the group even after the leader exited): SIGTERM, up to grace for the exit,
// SIGKILL, up to grace again (at least killWait). Exits are confirmed on the
// pidfd; for a group whose leader has exited, by probing the group. It
// returns what it did, and an error when the end could not be confirmed.
// When ctx ends (a recovery's deadline) Terminate sends nothing more and
// returns an error that says so: it never reports a wait it did not make.
func Terminate(ctx context.Context, p *owner.Process, group bool, grace time.Duration) ([]string, error) {
	send := p.Signal
	what := fmt.Sprintf("pid %d", p.Identity().PID)
	if group {
		send = p.SignalGroup
		what = fmt.Sprintf("process group %d", p.Identity().PID)
	}
	var msgs []string
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if ctx.Err() != nil {
			return msgs, fmt.Errorf("%s: %s not sent: %w", what, unix.SignalName(sig), context.Cause(ctx))
		}
		t0 := time.Now()
		err := send(sig)
		if errors.Is(err, owner.ErrGone) && group && !p.Exited() {
			// ESRCH for a group send while the process lives: it no
			// longer leads a group (it moved itself with setpgid), or its
			// group is empty. "Gone" must mean gone: end the process.
			group, send, what = false, p.Signal, fmt.Sprintf("pid %d", p.Identity().PID)
			msgs = append(msgs, "no longer leads a process group")
			err = send(sig)
		}
		if err != nil {
			if errors.Is(err, owner.ErrGone) {
				return append(msgs, what+" gone"), nil
			}
			return msgs, err
		}
		wait := grace
		if sig == syscall.SIGKILL && wait < killWait {
			// SIGKILL cannot be caught: what remains is the kernel
			// tearing the process down, which a loaded machine can
			// stretch past a short grace. Waiting longer costs nothing
			// when it is quick.
			wait = killWait
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		err = p.Wait(wctx)
		if err == nil && group {
			err = awaitGroupEmpty(wctx, p)
		}
		cancel()
		if err == nil {
			return append(msgs, fmt.Sprintf("%s to %s: exited after %v", unix.SignalName(sig), what, time.Since(t0).Round(time.Millisecond))), nil
		}
		if ctx.Err() != nil {
			return append(msgs, fmt.Sprintf("%s to %s: exit not confirmed after %v", unix.SignalName(sig), what, time.Since(t0).Round(time.Millisecond))),
				fmt.Errorf("%s: exit not confirmed: %w", what, context.Cause(ctx))
		}
		msgs = append(msgs, fmt.Sprintf("%s to %s: still running after %v", unix.SignalName(sig), what, wait))
	}
	return msgs, fmt.Errorf("%s did not exit %v after SIGKILL", what, max(grace, killWait))
}

// awaitGroupEmpty confirms that no member of the leader's group remains
// after SIGKILL. Members the journal does not name individually have no
// pidfd here, so signal 0 to the group is the probe; since an unreaped
// zombie still counts for kill(2), a probe that finds the group non-empty is
// followed by a look at the members' states (zombies are dead). SIGKILL is
// delivered at once, so this normally succeeds on the first probe. The wait
// between probes doubles from 1 ms.
func awaitGroupEmpty(ctx context.Context, leader *owner.Process) error {
	delay := time.Millisecond
	for {
		err := leader.SignalGroup(0)
		if errors.Is(err, owner.ErrGone) {
			return nil
		}
		if err != nil {
			return err
		}
		if alive, err := owner.GroupAlive(leader.Identity().PID); err == nil && !alive {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}
