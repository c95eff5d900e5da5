package reliability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

// signalGrace is the grace period of the cleanups under fire: the
// TERM-ignoring processes keep each cleanup busy for that long.
const signalGrace = time.Second

// slowScript ignores SIGTERM and SIGINT (recording the first in $M/term) and
// keeps running until SIGKILL: a cleanup has to wait for it for the whole
// grace period.
const slowScript = `trap ': > "$M/term"' TERM INT; : > "$M/slow-ready"; echo ready; while :; do sleep 1 & wait $!; done`

// testSignals delivers 2 or 3 SIGINT/SIGTERM while a cleanup runs, in turn
// to `ownerjournal recover --all` ending a TERM-ignoring orphan, to
// `ownerjournal run` ending its tree, and to a process cleaning up under
// recover.NewGuard. Every cleanup must complete, and the process exit with
// 128+n of the first signal.
func testSignals(t *testing.T, e *env) {
	variants := []struct {
		name string
		fn   func(t *testing.T, e *env, rs *runState, sigs []syscall.Signal) bool
	}{
		{"recover", signalsRecover},
		{"run", signalsRun},
		{"guard", signalsGuard},
	}
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	for i := 0; i < *flagSignalRuns; i++ {
		v := variants[i%len(variants)]
		sigs := make([]syscall.Signal, 2+rng.IntN(2))
		for k := range sigs {
			sigs[k] = []syscall.Signal{syscall.SIGINT, syscall.SIGTERM}[rng.IntN(2)]
		}
		t.Run(fmt.Sprintf("%s/%d", v.name, i), func(t *testing.T) {
			rs := e.newRun(t, "signals-"+v.name, i)
			require.NoError(t, os.Mkdir(filepath.Join(rs.dir, "m"), 0o700))
			completed := v.fn(t, e, rs, sigs)
			assert.True(t, completed, "cleanup under signals %v did not complete", sigs)
			leaked := e.countLeaks(t, rs)
			if !completed && leaked == 0 {
				leaked = 1 // an incomplete cleanup is a leak even when nothing was found
			}
			sum.add(1, leaked, e.checkBystanders(t, "signals"), 0)
		})
	}
}

// fire sends the signals through the pidfd: the first, then the rest once
// the cleanup is known to be running.
func fireRest(t *testing.T, p *proc, sigs []syscall.Signal) {
	t.Helper()
	for _, s := range sigs[1:] {
		// ESRCH: the cleanup finished first (a loaded machine); the
		// outcome is still checked.
		if err := p.signal(s); err != nil && err != syscall.ESRCH {
			require.NoError(t, err)
		}
	}
}

// startSlow starts the TERM-ignoring process leading its own group.
func (e *env) startSlow(t *testing.T, rs *runState) (*proc, owner.Identity) {
	t.Helper()
	m := filepath.Join(rs.dir, "m")
	cmd := exec.Command("sh", "-c", slowScript)
	cmd.Env = append(os.Environ(), tagEnv(rs.tag, "M="+m)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := e.spawn(t, cmd)
	waitUntil(t, []string{m}, p, fileExists(filepath.Join(m, "slow-ready")), "slow process ready")
	id, err := owner.Of(p.pid())
	require.NoError(t, err)
	return p, id
}

func fileExists(path string) func() bool {
	return func() bool { _, err := os.Stat(path); return err == nil }
}

func signalsRecover(t *testing.T, e *env, rs *runState, sigs []syscall.Signal) bool {
	m := filepath.Join(rs.dir, "m")
	slow, id := e.startSlow(t, rs)
	j, err := journal.Open(rs.root)
	require.NoError(t, err)
	require.NoError(t, j.Publish(context.Background(), &journal.Record{Kind: journal.KindProcess, Label: "slow orphan",
		Subject: &id, PGID: id.PID, Owner: e.deadIdentity(t), Phase: journal.PhaseLive}))
	j.Close()
	cmd := exec.Command(e.cli, "recover", "--root", rs.root, "--all", "--grace", signalGrace.String())
	cmd.Env = append(os.Environ(), tagEnv(rs.tag)...)
	rec := e.spawn(t, cmd)
	// The orphan's TERM trap fired: recovery is in its grace period.
	waitUntil(t, []string{m}, rec, fileExists(filepath.Join(m, "term")), "SIGTERM reached the orphan")
	require.NoError(t, rec.signal(sigs[0]))
	fireRest(t, rec, sigs)
	require.NoError(t, rec.wait(timeout))
	require.NoError(t, slow.wait(timeout), "the orphan was ended")
	// The signals arrive together: the kernel (and the Go runtime) hand
	// pending signals over lowest number first, so "the first" is any of
	// them. (The guard variant waits for the first to be caught.)
	ok := false
	for _, s := range sigs {
		ok = ok || rec.exitCode() == 128+int(s)
	}
	if !ok {
		t.Errorf("recover exited %d, want 128+n of one of %v:\n%s", rec.exitCode(), sigs, rec.stderrText())
	}
	if _, err := os.Lstat(rs.root); err == nil {
		t.Errorf("the root was kept:\n%s", rec.stderrText())
		ok = false
	}
	return ok
}

func signalsRun(t *testing.T, e *env, rs *runState, sigs []syscall.Signal) bool {
	m := filepath.Join(rs.dir, "m")
	j, err := journal.Open(rs.root)
	require.NoError(t, err)
	j.Close()
	cmd := exec.Command(e.cli, "run", "--root", rs.root, "--label", "slow", "--grace", signalGrace.String(), "--", "sh", "-c", slowScript)
	cmd.Env = append(os.Environ(), tagEnv(rs.tag, "M="+m)...)
	sup := e.spawn(t, cmd)
	rs.watchCgroups(sup.pid())
	waitUntil(t, []string{m}, sup, fileExists(filepath.Join(m, "slow-ready")), "CMD ready")
	require.NoError(t, sup.signal(sigs[0]))
	// The forwarded signal reached CMD's trap: the tree's end has begun.
	waitUntil(t, []string{m}, sup, fileExists(filepath.Join(m, "term")), "CMD got the forwarded signal")
	fireRest(t, sup, sigs)
	require.NoError(t, sup.wait(timeout))
	ok := true
	// CMD ignored the signals and was SIGKILLed after the grace period.
	if code := sup.exitCode(); code != 128+int(syscall.SIGKILL) {
		t.Errorf("run exited %d, want %d (CMD's status):\n%s", code, 128+int(syscall.SIGKILL), sup.stderrText())
		ok = false
	}
	// It retired what it owned; the root then goes cleanly.
	out, code, err := e.run(exec.Command(e.cli, "recover", "--root", rs.root, "--all", "--grace", "1s"))
	require.NoError(t, err)
	if code != 0 {
		t.Errorf("recover --all after run: exit %d:\n%s", code, out)
		ok = false
	}
	return ok
}

func signalsGuard(t *testing.T, e *env, rs *runState, sigs []syscall.Signal) bool {
	m := filepath.Join(rs.dir, "m")
	require.NoError(t, os.Remove(rs.root)) // no root here
	c := e.child(t, "guard", childOpts{env: tagEnv(rs.tag, "M="+m)})
	c.waitReady(t, "ready")
	require.NoError(t, c.signal(sigs[0]))
	c.waitReady(t, "cleanup-started")
	// The slow process's trap fired: the cleanup is in its grace period.
	waitUntil(t, []string{m}, c, fileExists(filepath.Join(m, "term")), "cleanup signalled the slow process")
	fireRest(t, c, sigs)
	require.NoError(t, c.wait(timeout))
	ok := c.exitCode() == 128+int(sigs[0])
	if !ok {
		t.Errorf("guarded process exited %d, want %d:\n%s", c.exitCode(), 128+int(sigs[0]), c.stderrText())
	}
	if _, err := os.Stat(filepath.Join(c.ready, "cleanup-done")); err != nil {
		t.Errorf("cleanup did not complete")
		ok = false
	}
	return ok
}

// childGuard runs a TERM-ignoring process and, at the first signal, ends it
// in a cleanup under recover.NewGuard; it exits with the guard's status.
func childGuard() int {
	cmd := exec.Command("sh", "-c", slowScript)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return childFail("guard", err)
	}
	if err := cmd.Start(); err != nil {
		return childFail("guard", err)
	}
	id, err := owner.Of(cmd.Process.Pid)
	if err != nil {
		return childFail("guard", err)
	}
	p, err := owner.Open(id)
	if err != nil {
		return childFail("guard", err)
	}
	ctx, g := recover.NewGuard(context.Background(), func(ctx context.Context) error {
		if err := testroot.Ready("cleanup-started", nil); err != nil {
			return err
		}
		if _, err := recover.Terminate(ctx, p, true, signalGrace); err != nil {
			return err
		}
		cmd.Wait()
		return testroot.Ready("cleanup-done", nil)
	})
	// The slow process says "ready" once its trap is set.
	if line, err := readLine(out); err != nil || line != "ready" {
		return childFail("guard", fmt.Errorf("slow process: %q %v", line, err))
	}
	if err := testroot.Ready("ready", nil); err != nil {
		return childFail("guard", err)
	}
	<-ctx.Done()
	if err := g.Cleanup(); err != nil {
		fmt.Fprintln(os.Stderr, "guard: cleanup:", err)
	}
	g.Stop()
	return g.ExitCode()
}
