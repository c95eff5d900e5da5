package main

import (
	"fmt"
	"os"
	"path/filepath"
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
