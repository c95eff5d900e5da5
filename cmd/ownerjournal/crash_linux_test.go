package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

// The crash tests: real processes (the test binary re-executed as a helper),
// real signals, SIGKILL at marked points, then recovery through the CLI, and
// checks of /proc and the filesystem that nothing is left and that nothing
// else was touched.

// proc is a process a test started: its command, a pidfd to notice its exit
// while waiting for something else, and its identity.
type proc struct {
	cmd   *exec.Cmd
	pidfd int
	id    owner.Identity
	out   *testroot.Buffer
	errb  *testroot.Buffer
}

// start starts cmd with captured output and registers a cleanup that
// SIGKILLs and reaps it if the test did not.
func start(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, pidfd: -1, out: &testroot.Buffer{}, errb: &testroot.Buffer{}}
	cmd.Stdout, cmd.Stderr = p.out, p.errb
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if p.pidfd >= 0 {
			unix.Close(p.pidfd)
		}
		if t.Failed() {
			t.Logf("%v: stdout:\n%s\nstderr:\n%s", cmd.Args, p.out, p.errb)
		}
	})
	// The child is not reaped before the cleanup: its PID is its own.
	fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	require.NoError(t, err)
	p.pidfd = fd
	// A short command (a recover with nothing to do) may already have
	// exited: its identity is then not needed, and not readable.
	p.id, err = owner.Of(cmd.Process.Pid)
	if !errors.Is(err, owner.ErrGone) {
		require.NoError(t, err)
	}
	return p
}

// wait reaps the process and returns its exit status (128+n if signalled).
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	var ee *exec.ExitError
	if err := p.cmd.Wait(); err != nil && !errors.As(err, &ee) {
		require.NoError(t, err)
	}
	return exitStatus(p.cmd.ProcessState)
}

// helper starts the test binary as the helper `args...` (TestMain dispatches
// on OJ_TEST_HELPER).
func helper(t *testing.T, args ...string) *proc {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), envHelper+"=1")
	cmd.Dir = "/"
	return start(t, cmd)
}

// ojCmd is `ownerjournal args...` (testscript.Main put it on PATH).
func ojCmd(args ...string) *exec.Cmd {
	cmd := exec.Command("ownerjournal", args...)
	cmd.Dir = "/"
	return cmd
}

// oj runs `ownerjournal args...` to completion.
func oj(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	p := start(t, ojCmd(args...))
	code = p.wait(t)
	return p.out.String(), p.errb.String(), code
}

// await waits for file in dir, failing early if p exits first.
func (p *proc) await(t *testing.T, path string) []byte {
	t.Helper()
	b, err := awaitFile(path, p.pidfd)
	require.NoError(t, err, "stderr of %v:\n%s", p.cmd.Args, p.errb)
	return b
}

func mustID(t *testing.T, path string) owner.Identity {
	t.Helper()
	id, err := readID(path)
	require.NoError(t, err)
	return id
}

func requireAlive(t *testing.T, id owner.Identity, what string) {
	t.Helper()
	v := owner.Check(id)
	require.Equal(t, owner.Alive, v.State, "%s (pid %d): %v", what, id.PID, v)
}

func requireDead(t *testing.T, id owner.Identity, what string) {
	t.Helper()
	v := owner.Check(id)
	require.Equal(t, owner.Dead, v.State, "%s (pid %d) must be gone: %v", what, id.PID, v)
}

// sleeper starts `ojhelper sleep dir/name flags...` and waits until it is
// ready.
func sleeper(t *testing.T, dir, name string, flags ...string) owner.Identity {
	t.Helper()
	p := helper(t, append([]string{"sleep", filepath.Join(dir, name)}, flags...)...)
	p.await(t, filepath.Join(dir, name+".id"))
	return p.id
}

// deadOwner returns the identity of a process that has exited.
func deadOwner(t *testing.T, dir string) owner.Identity {
	t.Helper()
	p := helper(t, "sleep", filepath.Join(dir, "owner"))
	p.await(t, filepath.Join(dir, "owner.id"))
	require.NoError(t, p.cmd.Process.Kill())
	p.wait(t)
	requireDead(t, p.id, "owner")
	return p.id
}

// bystanders are what recovery must never touch: an unrelated process and
// the developer's own tmux server on a socket outside the root.
type bystanders struct {
	dir    string
	proc   owner.Identity
	tmux   owner.Identity
	socket string
}

func startBystanders(t *testing.T, dir string) *bystanders {
	t.Helper()
	b := &bystanders{dir: dir, socket: filepath.Join(dir, "mine.sock")}
	b.proc = sleeper(t, dir, "bystander")
	t.Cleanup(func() { stopTmux(b.socket) })
	var err error
	b.tmux, err = startTmux(b.socket)
	require.NoError(t, err, "tmux must be installed")
	return b
}

func (b *bystanders) check(t *testing.T) {
	t.Helper()
	requireAlive(t, b.proc, "bystander process")
	assert.NoFileExists(t, filepath.Join(b.dir, "bystander.sig"), "the bystander was signalled")
	requireAlive(t, b.tmux, "bystander tmux server")
	assert.True(t, tmuxAnswers(b.socket), "the bystander tmux server must still answer")
}

// recoverReport runs `ownerjournal recover args... --json` and decodes its
// report, which must be the only document on stdout.
func recoverReport(t *testing.T, args ...string) (recover.Report, string, int) {
	t.Helper()
	stdout, stderr, code := oj(t, append([]string{"recover", "--json"}, args...)...)
	var rep recover.Report
	require.NoError(t, oneJSON([]byte(stdout), &rep), "stderr:\n%s", stderr)
	return rep, stderr, code
}

// requireRootGone checks that the root and any tombstone of it are gone.
func requireRootGone(t *testing.T, root string) {
	t.Helper()
	assert.NoDirExists(t, root)
	tombs, err := filepath.Glob(filepath.Join(filepath.Dir(root), "."+filepath.Base(root)+".removing-*"))
	require.NoError(t, err)
	assert.Empty(t, tombs, "a tombstone of the root was left")
}

// requireCgroupGone checks that a cgroup a record named was removed.
func requireCgroupGone(t *testing.T, path string) {
	t.Helper()
	if path != "" {
		assert.NoDirExists(t, path, "the run's cgroup was left")
	}
}

// newRoot is a fresh private root with a short path; the test's cleanup
// recovers it if the test left it (a failure) and removes it.
func newRoot(t *testing.T) string {
	t.Helper()
	root := testroot.PrivateDir(t, "oj")
	t.Cleanup(func() {
		if _, err := os.Lstat(root); err == nil {
			ojCmd("recover", "--all", "--grace", "100ms", "--root", root).Run()
		}
	})
	return root
}

// workDir holds a test's identity and readiness files; processes named in it
// are killed at cleanup if they are still alive (registered after newRoot,
// so it runs first).
func workDir(t *testing.T) string {
	t.Helper()
	dir := testroot.PrivateDir(t, "ojw")
	t.Cleanup(func() {
		if killed := killLeftovers(dir); len(killed) > 0 {
			t.Errorf("processes left behind: %s", strings.Join(killed, ", "))
		}
	})
	return dir
}

var cgroupModes = []string{"auto", "off"}

// TestCrashWorkerKilled: a worker runs `ownerjournal run` over a CMD whose
// double-forked setsid daemon ignores SIGTERM. The worker is SIGKILLed: run's
// parent-death signal makes it end the whole tree itself and retire every
// record; `recover --all` then removes the root. Bystanders survive.
func TestCrashWorkerKilled(t *testing.T) {
	for _, mode := range cgroupModes {
		t.Run("cgroup="+mode, func(t *testing.T) {
			t.Parallel()
			root := newRoot(t)
			dir := workDir(t)
			by := startBystanders(t, dir)
			w := helper(t, "spawn", filepath.Join(dir, "w"), "--",
				"ownerjournal", "run", "--root", root, "--cgroup", mode, "--grace", "300ms", "--",
				"ojhelper", "daemonize", filepath.Join(dir, "cmd"), filepath.Join(dir, "d"), "-ignore-term")
			w.await(t, filepath.Join(dir, "w.child.id"))
			w.await(t, filepath.Join(dir, "cmd.forked"))
			w.await(t, filepath.Join(dir, "d.id"))
			runID, cmdID, dID := mustID(t, filepath.Join(dir, "w.child.id")), mustID(t, filepath.Join(dir, "cmd.id")), mustID(t, filepath.Join(dir, "d.id"))
			_, err := awaitRecord(root, dID, w.pidfd)
			require.NoError(t, err)
			cmdRec, err := awaitRecord(root, cmdID, w.pidfd)
			require.NoError(t, err)

			// run is the worker's child: open a handle on it while the
			// worker lives, so that it cannot have been reaped.
			runP, err := owner.Open(runID)
			require.NoError(t, err)
			defer runP.Close()
			require.NoError(t, w.cmd.Process.Kill())
			require.Equal(t, 128+int(syscall.SIGKILL), w.wait(t))

			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			require.NoError(t, runP.Wait(ctx), "run must end after its parent died")
			requireDead(t, cmdID, "CMD")
			requireDead(t, dID, "daemon")
			requireCgroupGone(t, cmdRec.Cgroup)
			recs, err := readRecords(root)
			require.NoError(t, err)
			require.Empty(t, recs, "run must retire every record before it exits")

			rep, _, code := recoverReport(t, "--all", "--root", root)
			require.Equal(t, 0, code)
			require.True(t, rep.RootRemoved, "root kept: %s", rep.RootKept)
			requireRootGone(t, root)
			by.check(t)
		})
	}
}

// TestCrashRunKilled: `ownerjournal run` itself is SIGKILLed while CMD's
// double-forked setsid daemon (which ignores SIGTERM) lives. CMD dies with
// run (its parent-death signal); the daemon survives, journaled. Recovery,
// orphans-only or --all, ends it (through its record, and through the
// cgroup when there is one) and removes the root. Bystanders survive.
func TestCrashRunKilled(t *testing.T) {
	for _, mode := range cgroupModes {
		for _, all := range []bool{false, true} {
			t.Run(fmt.Sprintf("cgroup=%s/all=%v", mode, all), func(t *testing.T) {
				t.Parallel()
				root := newRoot(t)
				dir := workDir(t)
				by := startBystanders(t, dir)
				run := start(t, ojCmd("run", "--root", root, "--cgroup", mode, "--",
					"ojhelper", "daemonize", filepath.Join(dir, "cmd"), filepath.Join(dir, "d"), "-ignore-term"))
				run.await(t, filepath.Join(dir, "cmd.forked"))
				run.await(t, filepath.Join(dir, "d.id"))
				cmdID, dID := mustID(t, filepath.Join(dir, "cmd.id")), mustID(t, filepath.Join(dir, "d.id"))
				_, err := awaitRecord(root, dID, run.pidfd)
				require.NoError(t, err)
				cmdRec, err := awaitRecord(root, cmdID, run.pidfd)
				require.NoError(t, err)

				require.NoError(t, run.cmd.Process.Kill())
				require.Equal(t, 128+int(syscall.SIGKILL), run.wait(t))
				require.NoError(t, awaitGone(cmdID), "CMD must die with run (Pdeathsig)")
				requireAlive(t, dID, "the escaped daemon")

				args := []string{"--grace", "300ms", "--root", root}
				if all {
					args = append(args, "--all")
				}
				rep, _, code := recoverReport(t, args...)
				require.Equal(t, 0, code)
				require.True(t, rep.RootRemoved, "root kept: %s", rep.RootKept)
				requireDead(t, dID, "daemon")
				b, err := os.ReadFile(filepath.Join(dir, "d.sig"))
				if cmdRec.Cgroup == "" {
					require.NoError(t, err, "the daemon is asked to terminate first")
					require.Equal(t, "SIGTERM\n", string(b))
				}
				requireCgroupGone(t, cmdRec.Cgroup)
				requireRootGone(t, root)
				by.check(t)
			})
		}
	}
}

// publishRaw publishes rec in root from the test process, for records the
// CLI would never write (forged ones).
func publishRaw(t *testing.T, root string, rec *journal.Record) string {
	t.Helper()
	r, err := journal.Open(root)
	require.NoError(t, err)
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	require.NoError(t, r.Publish(ctx, rec))
	return rec.ID
}

// TestRecoverForgedRecords: a record whose subject names a live process with
// a forged start time (or an earlier boot) is stale, never signalled; one
// with a forged UID or host cannot be verified and is retained (exit 3).
// The process it names is never touched, in either mode.
func TestRecoverForgedRecords(t *testing.T) {
	tests := []struct {
		name   string
		forge  func(id *owner.Identity)
		code   int
		kept   bool
		reason string
	}{
		{"start time", func(id *owner.Identity) { id.StartTime++ }, 0, false, "reused"},
		{"earlier start time", func(id *owner.Identity) { id.StartTime-- }, 0, false, "reused"},
		{"boot id", func(id *owner.Identity) { id.BootID = "00000000-0000-0000-0000-000000000000" }, 0, false, "earlier boot"},
		{"uid", func(id *owner.Identity) { id.UID++ }, 3, true, "runs as uid"},
		{"host", func(id *owner.Identity) { id.Host += ".elsewhere" }, 3, true, "recorded on host"},
	}
	for _, tt := range tests {
		for _, all := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/all=%v", tt.name, all), func(t *testing.T) {
				t.Parallel()
				root := newRoot(t)
				dir := workDir(t)
				victim := sleeper(t, dir, "victim")
				forged := victim
				tt.forge(&forged)
				rec := &journal.Record{Kind: journal.KindProcess, Label: "forged " + tt.name, Subject: &forged, Owner: deadOwner(t, dir), Phase: journal.PhaseLive}
				publishRaw(t, root, rec)

				args := []string{"--grace", "300ms", "--root", root}
				if all {
					args = append(args, "--all")
				}
				rep, _, code := recoverReport(t, args...)
				require.Equal(t, tt.code, code)
				require.Len(t, rep.Actions, 1)
				require.Contains(t, rep.Actions[0].Reason, tt.reason)
				requireAlive(t, victim, "the process a forged record names")
				require.NoFileExists(t, filepath.Join(dir, "victim.sig"), "the victim was signalled")
				if tt.kept {
					require.False(t, rep.RootRemoved)
					require.DirExists(t, root)
					require.FileExists(t, filepath.Join(root, "records", rec.ID+".json"))
				} else {
					require.True(t, rep.RootRemoved, "root kept: %s", rep.RootKept)
					requireRootGone(t, root)
				}
			})
		}
	}
}

// TestRecoverTruncatedRecord: a truncated record is corrupt. `recover --all`
// exits 3, keeps the root and the record exactly as they are, and never
// touches the process the record named.
func TestRecoverTruncatedRecord(t *testing.T) {
	t.Parallel()
	root := newRoot(t)
	dir := workDir(t)
	victim := sleeper(t, dir, "victim")
	stdout, stderr, code := oj(t, "publish", "--root", root, "--pid", fmt.Sprint(victim.PID), "--owner-pid", fmt.Sprint(victim.PID), "--label", "victim")
	require.Equal(t, 0, code, stderr)
	path := filepath.Join(root, "records", strings.TrimSpace(stdout)+".json")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, int64(len(b)/2)))
	want, err := os.ReadFile(path)
	require.NoError(t, err)

	rep, _, code := recoverReport(t, "--all", "--grace", "300ms", "--root", root)
	require.Equal(t, 3, code)
	require.False(t, rep.RootRemoved)
	require.NotEmpty(t, rep.RootKept)
	require.Len(t, rep.Actions, 1)
	require.Equal(t, recover.Corrupt, rep.Actions[0].Verdict)
	require.NotEmpty(t, rep.Actions[0].Retained)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, got, "the corrupt record must be kept as it is")
	requireAlive(t, victim, "the process the corrupt record names")
	require.NoFileExists(t, filepath.Join(dir, "victim.sig"), "the victim was signalled")

	// status agrees: exit 3, the record retained.
	_, _, code = oj(t, "status", "--root", root)
	require.Equal(t, 3, code)
	require.NoError(t, os.Remove(path))
}

// TestTwoRecoverersAtOnce: two recoverers started together on one root both
// succeed (exit 0); the root is removed exactly once and no tombstone is
// left; every orphan is gone.
func TestTwoRecoverersAtOnce(t *testing.T) {
	modes := [][2]bool{{true, true}, {false, false}, {true, false}}
	for _, m := range modes {
		t.Run(fmt.Sprintf("all=%v,%v", m[0], m[1]), func(t *testing.T) {
			t.Parallel()
			for round := 0; round < 4; round++ {
				root := newRoot(t)
				dir := workDir(t)
				dead := deadOwner(t, dir)
				var orphans []owner.Identity
				for i := 0; i < 3; i++ {
					var flags []string
					if i == 0 {
						flags = append(flags, "-ignore-term")
					}
					id := sleeper(t, dir, fmt.Sprintf("orphan%d", i), flags...)
					orphans = append(orphans, id)
					publishRaw(t, root, &journal.Record{Kind: journal.KindProcess, Subject: &id, Owner: dead, Phase: journal.PhaseLive})
				}
				var rs []*proc
				for _, all := range m {
					args := []string{"recover", "--json", "--grace", "200ms", "--root", root}
					if all {
						args = append(args, "--all")
					}
					rs = append(rs, start(t, ojCmd(args...)))
				}
				removed := 0
				for i, r := range rs {
					code := r.wait(t)
					require.Equal(t, 0, code, "recoverer %d: %s", i, r.errb)
					var rep recover.Report
					require.NoError(t, oneJSON(r.out.Bytes(), &rep))
					removed += strings.Count(r.errb.String(), "ownerjournal: removed root")
				}
				require.Equal(t, 1, removed, "the root must be removed exactly once")
				requireRootGone(t, root)
				for _, id := range orphans {
					requireDead(t, id, "orphan")
				}
			}
		})
	}
}

// TestRecoverEscalatesToKill: orphans that ignore SIGTERM get SIGTERM first,
// then SIGKILL after the grace period; recovery confirms every exit and
// removes the root.
func TestRecoverEscalatesToKill(t *testing.T) {
	t.Parallel()
	root := newRoot(t)
	dir := workDir(t)
	dead := deadOwner(t, dir)
	var ids []owner.Identity
	for i := 0; i < 3; i++ {
		id := sleeper(t, dir, fmt.Sprintf("stubborn%d", i), "-ignore-term")
		ids = append(ids, id)
		publishRaw(t, root, &journal.Record{Kind: journal.KindProcess, Subject: &id, Owner: dead, Phase: journal.PhaseLive})
	}
	// A grace long enough for a loaded machine to schedule the orphan's
	// handler (it records the SIGTERM it ignores): 200 ms was not, once.
	rep, _, code := recoverReport(t, "--grace", "1s", "--root", root)
	require.Equal(t, 0, code)
	require.True(t, rep.RootRemoved, "root kept: %s", rep.RootKept)
	require.Len(t, rep.Actions, 3)
	for _, a := range rep.Actions {
		assert.Equal(t, recover.Orphan, a.Verdict)
		joined := strings.Join(a.Done, "; ")
		assert.Contains(t, joined, "SIGTERM to pid")
		assert.Regexp(t, `still running after [0-9.]+m?s \(grace 1s\)`, joined)
		assert.Regexp(t, `SIGKILL to pid \d+: exited after`, joined)
	}
	for i, id := range ids {
		requireDead(t, id, "TERM-ignoring orphan")
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("stubborn%d.sig", i)))
		require.NoError(t, err)
		require.Equal(t, "SIGTERM\n", string(b))
	}
	requireRootGone(t, root)
}

// TestRecoverSurvivesSignals: three signals sent to `recover --all` while it
// waits out the grace period of a TERM-ignoring orphan do not cut it short:
// the orphan is SIGKILLed, the root removed, the whole report printed, and
// the exit status is the first signal's 128+n.
func TestRecoverSurvivesSignals(t *testing.T) {
	tests := []struct {
		name string
		sigs []syscall.Signal
	}{
		{"TERM TERM TERM", []syscall.Signal{syscall.SIGTERM, syscall.SIGTERM, syscall.SIGTERM}},
		// Sent back to back, signals pending together are delivered
		// lowest number first: in this order the first sent is also the
		// first delivered.
		{"HUP INT TERM", []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM}},
		{"INT INT INT", []syscall.Signal{syscall.SIGINT, syscall.SIGINT, syscall.SIGINT}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := newRoot(t)
			dir := workDir(t)
			orphan := sleeper(t, dir, "orphan", "-ignore-term")
			publishRaw(t, root, &journal.Record{Kind: journal.KindProcess, Subject: &orphan, Owner: deadOwner(t, dir), Phase: journal.PhaseLive})

			r := start(t, ojCmd("recover", "--all", "--json", "--grace", "2s", "--root", root))
			// The orphan records the SIGTERM: recovery is in its grace
			// period now.
			r.await(t, filepath.Join(dir, "orphan.sig"))
			for i, s := range tt.sigs {
				require.NoError(t, r.cmd.Process.Signal(s))
				if i == 0 {
					// A process-directed signal may be taken by any
					// thread: two sent back to back can reach the
					// handler out of order on a loaded machine. The
					// first one counts, so let the kernel hand it over
					// before the others are sent.
					awaitDelivered(t, r.cmd.Process.Pid, s)
				}
			}
			code := r.wait(t)
			require.Equal(t, 128+int(tt.sigs[0]), code, "stderr:\n%s", r.errb)
			var rep recover.Report
			require.NoError(t, oneJSON(r.out.Bytes(), &rep), "the report must be complete")
			require.True(t, rep.RootRemoved, "root kept: %s", rep.RootKept)
			require.Zero(t, rep.Retained)
			requireDead(t, orphan, "orphan")
			requireRootGone(t, root)
		})
	}
}

// TestRecoverAllEndsLiveRun: the runner ends the run (`recover --all`) while
// a worker's `ownerjournal run` is alive, with a double-forked daemon that
// ignores SIGTERM. Recovery ends CMD and the daemon, waits for run (which
// holds its lease) to retire what it owned and exit, and removes the root.
func TestRecoverAllEndsLiveRun(t *testing.T) {
	for _, mode := range cgroupModes {
		t.Run("cgroup="+mode, func(t *testing.T) {
			t.Parallel()
			root := newRoot(t)
			dir := workDir(t)
			by := startBystanders(t, dir)
			run := start(t, ojCmd("run", "--root", root, "--cgroup", mode, "--",
				"ojhelper", "daemonize", filepath.Join(dir, "cmd"), filepath.Join(dir, "d"), "-ignore-term"))
			run.await(t, filepath.Join(dir, "cmd.forked"))
			run.await(t, filepath.Join(dir, "d.id"))
			cmdID, dID := mustID(t, filepath.Join(dir, "cmd.id")), mustID(t, filepath.Join(dir, "d.id"))
			_, err := awaitRecord(root, dID, run.pidfd)
			require.NoError(t, err)
			cmdRec, err := awaitRecord(root, cmdID, run.pidfd)
			require.NoError(t, err)

			rep, stderr, code := recoverReport(t, "--all", "--grace", "2s", "--root", root)
			require.Equal(t, 0, code, stderr)
			require.True(t, rep.RootRemoved, "root kept: %s", rep.RootKept)
			requireDead(t, cmdID, "CMD")
			requireDead(t, dID, "daemon")
			// CMD was ended by SIGTERM (it does not catch it): run exits
			// with CMD's status.
			require.Equal(t, 128+int(syscall.SIGTERM), run.wait(t), "stderr of run:\n%s", run.errb)
			requireCgroupGone(t, cmdRec.Cgroup)
			requireRootGone(t, root)
			by.check(t)
		})
	}
}

// awaitDelivered waits until sig is no longer pending for pid (thread or
// process-wide, /proc/PID/status SigPnd and ShdPnd): the kernel has handed it
// to a handler.
func awaitDelivered(t *testing.T, pid int, sig syscall.Signal) {
	t.Helper()
	bit := uint64(1) << (uint(sig) - 1)
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return true // gone: nothing is pending any more
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok || (k != "SigPnd" && k != "ShdPnd") {
				continue
			}
			if m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && m&bit != 0 {
				return false
			}
		}
		return true
	}, time.Minute, time.Millisecond)
}
