package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/owner"
)

// walkerScript is a TERM-ignoring process that, every 20 ms, starts a fresh
// copy of itself in a new session (setsid) and exits: its PID, session and
// process group change all the time, and SIGTERM does nothing.
const walkerScript = `trap '' TERM
echo $$ >> %[1]s/gens
sleep 0.02
setsid sh %[1]s/walker.sh </dev/null >/dev/null 2>&1 &
exit 0
`

// TestRunReforkingWalker (issue 13): CMD starts the walker, with
// --cgroup=off, and run is told to stop. After run exits, every live
// process the walker made is either dead or journaled by the identity it
// has, and a following recover ends it. On main before the fix, run retired
// its records at its deadline while the walker lived on, in no record.
//
//   - killed: run's later rounds stop the walker where they find it and
//     kill it: nothing survives, run exits with CMD's status (143);
//   - survives: SIGKILL withheld (a test seam standing for a process that
//     SIGKILL does not end in time): the stopped walker stays journaled,
//     run exits 3 saying what is still running, `recover` ends it.
func TestRunReforkingWalker(t *testing.T) {
	for _, survives := range []bool{false, true} {
		t.Run(map[bool]string{false: "killed", true: "survives"}[survives], func(t *testing.T) {
			t.Parallel()
			root := newRoot(t)
			dir := workDir(t)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "walker.sh"), []byte(fmt.Sprintf(walkerScript, dir)), 0o600))
			tag := fmt.Sprintf("walker-%d-%v", os.Getpid(), survives)
			t.Cleanup(func() { killAll(tagged(t, tag)) })
			script := fmt.Sprintf(`setsid sh %[1]s/walker.sh </dev/null >/dev/null 2>&1 & exec ojhelper sleep %[1]s/cmd`, dir)
			cmd := ojCmd("run", "--root", root, "--cgroup", "off", "--grace", "300ms", "--", "sh", "-c", script)
			cmd.Env = append(os.Environ(), "OJ_ESCAPE_TAG="+tag)
			if survives {
				cmd.Env = append(cmd.Env, "OJ_TEST_NO_FORCEFUL_KILL=1")
			}
			run := start(t, cmd)
			run.await(t, filepath.Join(dir, "cmd.id"))
			// Five generations under run.
			require.NoError(t, awaitDir(dir, run.pidfd, func() (bool, error) {
				b, _ := os.ReadFile(filepath.Join(dir, "gens"))
				return strings.Count(string(b), "\n") >= 5, nil
			}))
			t0 := time.Now()
			require.NoError(t, run.cmd.Process.Signal(syscall.SIGTERM))
			code := run.wait(t)
			took := time.Since(t0)

			live := tagged(t, tag)
			recs, err := readRecords(root)
			require.NoError(t, err)
			inJournal := map[owner.Identity]bool{}
			for _, r := range recs {
				if r.Subject != nil {
					inJournal[*r.Subject] = true
				}
			}
			for _, id := range live {
				require.True(t, inJournal[id], "pid %d lives on and is in no record (records: %d)\nrun's stderr:\n%s", id.PID, len(recs), run.errb)
			}
			t.Logf("run exited %d after %v: %d of the walker's processes alive and journaled, %d record(s); stderr:\n%s",
				code, took.Round(time.Millisecond), len(live), len(recs), run.errb)
			if survives {
				require.Equal(t, exitRetained, code)
				require.NotEmpty(t, live, "the seam keeps the walker alive")
				require.Contains(t, run.errb.String(), "still running")
			} else {
				require.Equal(t, 128+int(syscall.SIGTERM), code, "CMD's status")
				require.Empty(t, live, "run's later rounds end the walker")
				require.Empty(t, recs)
			}

			rep, _, rcode := recoverReport(t, "--grace", "300ms", "--root", root)
			require.Equal(t, 0, rcode)
			require.True(t, rep.RootRemoved, "root kept: %s", rep.RootKept)
			require.Empty(t, tagged(t, tag), "recover ends what run left journaled")
		})
	}
}

// reuserScript, started by CMD in a session of its own, ignores SIGTERM,
// waits until CMD (pid $1) has been reaped, and then makes a child take
// CMD's old PID: it writes PID-1 to /proc/sys/kernel/ns_last_pid (the next
// fork in the namespace gets PID, as checkpoint/restore tools do) and forks,
// until the child got it (another fork on the machine may take it first).
// The child leads a session of its own (setsid, which execs without a fork
// here), so that nothing sent to the daemon's group reaches it.
// It writes the child's PID to %[1]s/reuser.pid, or "failed". (The daemon
// and CMD poll with short sleeps: they are the test's subject, not its
// waits.)
const reuserScript = `trap '' TERM
: > %[1]s/daemon.ready
T=$1
while [ -e /proc/$T ]; do sleep 0.005; done
i=0
while [ $i -lt 2000 ]; do
  i=$((i+1))
  echo $((T-1)) > /proc/sys/kernel/ns_last_pid
  setsid sleep 100000 &
  if [ $! = $T ]; then echo $! > %[1]s/.reuser.tmp; mv %[1]s/.reuser.tmp %[1]s/reuser.pid; wait; exit 0; fi
  kill $!
done
echo failed > %[1]s/.reuser.tmp; mv %[1]s/.reuser.tmp %[1]s/reuser.pid
sleep 100000
`

// TestRunPIDReuseOfCMD (issue 13): after CMD has exited and been reaped, a
// descendant (the child of a TERM-ignoring daemon CMD left) takes CMD's old
// PID. It is a descendant like any other: run ends it, or journals it. On
// main before the fix the descendant walk skipped CMD's PID for good, so run
// exited with it alive and in no record.
func TestRunPIDReuseOfCMD(t *testing.T) {
	t.Parallel()
	root := newRoot(t)
	dir := workDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "reuser.sh"), []byte(fmt.Sprintf(reuserScript, dir)), 0o600))
	tag := fmt.Sprintf("reuse-%d", os.Getpid())
	t.Cleanup(func() { killAll(tagged(t, tag)) })
	// CMD exits once the daemon is set up (in its own session, SIGTERM
	// ignored): before that, ending CMD's group would end it too.
	script := fmt.Sprintf(`echo $$ > %[1]s/cmd.pid; setsid sh %[1]s/reuser.sh $$ </dev/null >/dev/null 2>&1 &
while [ ! -e %[1]s/daemon.ready ]; do sleep 0.005; done; exit 0`, dir)
	cmd := ojCmd("run", "--root", root, "--cgroup", "off", "--grace", "5s", "--", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "OJ_ESCAPE_TAG="+tag)
	run := start(t, cmd)
	b := run.await(t, filepath.Join(dir, "reuser.pid"))
	require.NotEqual(t, "failed\n", string(b), "no fork got CMD's old PID in 2000 tries")
	cmdPID, err := os.ReadFile(filepath.Join(dir, "cmd.pid"))
	require.NoError(t, err)
	require.Equal(t, strings.TrimSpace(string(cmdPID)), strings.TrimSpace(string(b)), "the reuser has CMD's old PID")
	reuser, err := owner.Of(mustAtoi(t, strings.TrimSpace(string(b))))
	require.NoError(t, err)
	ppid, err := owner.ParentOf(reuser.PID)
	require.NoError(t, err)
	t.Logf("pid %d (CMD's) reused by a descendant of run (parent %d)", reuser.PID, ppid)

	code := run.wait(t)
	recs, err := readRecords(root)
	require.NoError(t, err)
	journaled := false
	for _, r := range recs {
		journaled = journaled || (r.Subject != nil && *r.Subject == reuser)
	}
	v := owner.Check(reuser)
	require.True(t, v.State == owner.Dead || journaled, "the process with CMD's old PID outlived run in no record: %v (run exited %d)\nstderr:\n%s", v, code, run.errb)
	t.Logf("run exited %d; the reuser: %v, journaled: %v", code, v, journaled)
	require.Empty(t, tagged(t, tag), "nothing of CMD's tree is left")
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
