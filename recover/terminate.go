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

// terminate opens a verified handle on id and ends it with [Terminate]. An
// open that fails for want of a descriptor or memory (EMFILE, ENFILE,
// ENOMEM: other terminations of the same recovery hold theirs) is retried
// until grace has passed, then reported as such; it never counts as gone.
func terminate(ctx context.Context, id owner.Identity, group bool, grace time.Duration) ([]string, error) {
	var p *owner.Process
	err := retryScarce(ctx, time.Now().Add(grace), func() (err error) {
		p, err = owner.Open(id)
		return err
	})
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
//
// SIGKILL follows SIGTERM only once grace has really elapsed (or the exit is
// confirmed): a pidfd wait that fails (EMFILE, ENOMEM) falls back to polling
// the handle already held; a wait cut short by ctx is reported as such, with
// no SIGKILL. Every "still running after D" states the time measured since
// the signal.
func Terminate(ctx context.Context, p *owner.Process, group bool, grace time.Duration) ([]string, error) {
	send := p.Signal
	what := fmt.Sprintf("pid %d", p.Identity().PID)
	if group {
		send = p.SignalGroup
		what = fmt.Sprintf("process group %d", p.Identity().PID)
	}
	var msgs []string
	var killed time.Time
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
		if sig == syscall.SIGKILL {
			killed = t0
		}
		wait := grace
		if sig == syscall.SIGKILL && wait < killWait {
			// SIGKILL cannot be caught: what remains is the kernel
			// tearing the process down, which a loaded machine can
			// stretch past a short grace. Waiting longer costs nothing
			// when it is quick.
			wait = killWait
		}
		err = awaitExit(ctx, p, group, t0.Add(wait))
		if err == nil {
			return append(msgs, fmt.Sprintf("%s to %s: exited after %v", unix.SignalName(sig), what, time.Since(t0).Round(time.Millisecond))), nil
		}
		if ctx.Err() != nil {
			return append(msgs, fmt.Sprintf("%s to %s: exit not confirmed after %v", unix.SignalName(sig), what, time.Since(t0).Round(time.Millisecond))),
				fmt.Errorf("%s: exit not confirmed: %w", what, context.Cause(ctx))
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			// Not a timeout: the exit could not be watched. Saying
			// "still running" would be a guess, and SIGKILL now would cut
			// the grace short.
			msgs = append(msgs, fmt.Sprintf("%s to %s: exit cannot be confirmed after %v: %v", unix.SignalName(sig), what, time.Since(t0).Round(time.Millisecond), err))
			return msgs, fmt.Errorf("%s: exit after %s cannot be confirmed: %w", what, unix.SignalName(sig), err)
		}
		msgs = append(msgs, fmt.Sprintf("%s to %s: still running after %v (grace %v)", unix.SignalName(sig), what, time.Since(t0).Round(time.Millisecond), wait))
	}
	return msgs, fmt.Errorf("%s did not exit %v after SIGKILL", what, time.Since(killed).Round(time.Millisecond))
}

// awaitExit waits until p (and, for a group, every member) has exited, or
// until deadline; it returns context.DeadlineExceeded only once the deadline
// has really passed. A pidfd wait needs a descriptor of its own (a dup): when
// it fails (EMFILE, ENOMEM), the exit is polled on the handle already held,
// from 1 ms up to 50 ms apart, rather than given up on.
func awaitExit(ctx context.Context, p *owner.Process, group bool, deadline time.Time) error {
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	err := p.Wait(wctx)
	if err != nil && wctx.Err() == nil {
		// The pidfd wait itself failed (EMFILE on its dup, ENOMEM):
		// poll the descriptor already held instead.
		err = pollExit(wctx, p)
	}
	if err == nil && group {
		err = awaitGroupEmpty(wctx, p)
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		// The timer fired: make sure the caller never acts before the
		// deadline because of a clock rounding.
		if d := time.Until(deadline); d > 0 {
			time.Sleep(d)
		}
	}
	return err
}

// pollExit polls the held handle until the process exits or ctx is done.
func pollExit(ctx context.Context, p *owner.Process) error {
	delay := time.Millisecond
	for !p.Exited() {
		if !backoff(ctx, &delay) {
			return ctx.Err()
		}
	}
	return nil
}

// backoff waits *delay, then doubles it up to 50 ms; it returns false
// (without waiting the rest) when ctx is done first.
func backoff(ctx context.Context, delay *time.Duration) bool {
	t := time.NewTimer(*delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	if *delay < 50*time.Millisecond {
		*delay *= 2
	}
	return true
}

// scarce reports whether err is a shortage of descriptors or memory, which
// passes when other work releases what it holds.
func scarce(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) || errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EAGAIN)
}

// retryScarce calls fn until it succeeds, fails with something other than a
// shortage ([scarce]), or deadline passes; the last error is returned, so a
// shortage that outlasts the deadline is reported as what it is.
func retryScarce(ctx context.Context, deadline time.Time, fn func() error) error {
	delay := time.Millisecond
	for {
		err := fn()
		if err == nil || !scarce(err) || !time.Now().Add(delay).Before(deadline) {
			return err
		}
		if !backoff(ctx, &delay) {
			return err
		}
	}
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
		if !backoff(ctx, &delay) {
			return ctx.Err()
		}
	}
}
