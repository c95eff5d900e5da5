package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/owner"
)

func helperSpawnExit(args []string) int {
	name := len(args) > 0 && args[0] == "-name"
	if name {
		args = args[1:]
	}
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintln(os.Stderr, "usage: spawnexit [-name] BASE -- PROG [ARG...]")
		return 2
	}
	base, argv := args[0], args[2:]
	stdout, err := os.Create(base + ".out")
	if err == nil {
		defer stdout.Close()
	}
	stderr, err2 := os.Create(base + ".err")
	if err != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "ojhelper spawnexit:", err, err2)
		return 1
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if name {
		cmd.Env = append(os.Environ(), envSpawner+"="+strconv.Itoa(os.Getpid()))
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "ojhelper spawnexit:", err)
		return 1
	}
	// Unreaped, the child's identity is its own.
	id, err := owner.Of(cmd.Process.Pid)
	if err == nil {
		err = writeID(base+".child.id", id)
	}
	if err != nil && !errors.Is(err, owner.ErrGone) {
		fmt.Fprintln(os.Stderr, "ojhelper spawnexit:", err)
	}
	return 0
}

func helperReaper(args []string) int {
	setsid := len(args) > 0 && args[0] == "-setsid"
	if setsid {
		args = args[1:]
	}
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintln(os.Stderr, "usage: reaper [-setsid] BASE -- PROG [ARG...]")
		return 2
	}
	base, argv := args[0], args[2:]
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "ojhelper reaper:", err)
		return 1
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "ojhelper reaper:", err)
		return 1
	}
	var lines []string
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			break
		}
		code := ws.ExitStatus()
		if ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		lines = append(lines, fmt.Sprintf("%d %d", pid, code))
	}
	if err := publishFile(base+".reaped", []byte(strings.Join(lines, "\n")+"\n")); err != nil {
		fmt.Fprintln(os.Stderr, "ojhelper reaper:", err)
		return 1
	}
	return 0
}

// reaped reads a reaper's BASE.reaped: exit status by PID.
func reaped(t *testing.T, r *proc, base string) map[int]int {
	t.Helper()
	out := map[int]int{}
	b := r.await(t, base+".reaped")
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var pid, code int
		_, err := fmt.Sscanf(l, "%d %d", &pid, &code)
		require.NoError(t, err, "reaped line %q", l)
		out[pid] = code
	}
	return out
}

// spawnerGoneCase checks what a spawner that exited at once leaves: run
// ended (status 4, through the reaper that adopted it), the reason on its
// stderr, CMD never started or dead, the journal empty.
func spawnerGoneCase(t *testing.T, root, dir string, r *proc, runErr string) {
	t.Helper()
	// The reaper writes its list once every process it adopted has ended:
	// run, and CMD if run left it.
	got := reaped(t, r, filepath.Join(dir, "r"))
	require.Equal(t, 0, r.wait(t))
	var runStatus []int
	for _, code := range got {
		if code != 0 {
			runStatus = append(runStatus, code)
		}
	}
	require.Equal(t, []int{exitSpawnerGone}, runStatus, "exactly one process (run) exits non-zero, with 4: %v", got)
	b, err := os.ReadFile(runErr)
	require.NoError(t, err)
	require.Contains(t, string(b), "the spawner is gone", "run's stderr")
	started := "not started"
	if id, err := readID(filepath.Join(dir, "cmd.id")); err == nil {
		requireDead(t, id, "CMD")
		started = "started, then ended"
	}
	t.Logf("%s (CMD %s)", strings.TrimSpace(string(b)), started)
	recs, err := readRecords(root)
	if !errors.Is(err, fs.ErrNotExist) { // a root run never opened
		require.NoError(t, err)
	}
	require.Empty(t, recs, "nothing stays in the journal")
	stdout, _, code := oj(t, "status", "--root", root)
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "0 record(s)")
}

// TestSpawnerExitsAtOnce (issue 13): the spawner of `ownerjournal run` exits
// the moment it has started it — before run's first instruction, as a rule.
// run is adopted, by a subreaper here (so that its exit status can be read).
// It must start nothing (or end CMD's tree), exit 4 and say why:
//
//   - bash: `bash -c 'ownerjournal run -- CMD & exit 0'`, the issue's
//     reproduction; bash leads a session of its own, the reaper is outside
//     it, so run's parent after adoption is not in run's session;
//   - named: a spawner that names itself in OWNERJOURNAL_SPAWNER, adopted by
//     a reaper in its own session (which no session check could tell from a
//     spawner).
//
// On main before the fix, run started CMD in both and supervised it forever.
func TestSpawnerExitsAtOnce(t *testing.T) {
	for _, mode := range cgroupModes {
		for _, how := range []string{"bash", "named"} {
			t.Run("cgroup="+mode+"/"+how, func(t *testing.T) {
				t.Parallel()
				root := newRoot(t)
				dir := workDir(t)
				runArgs := []string{"ownerjournal", "run", "--root", root, "--cgroup", mode, "--grace", "300ms", "--", "ojhelper", "sleep", filepath.Join(dir, "cmd")}
				var r *proc
				runErr := filepath.Join(dir, "s.err")
				switch how {
				case "bash":
					script := shellQuote(runArgs) + " 2>" + runErr + " & exit 0"
					r = helper(t, "reaper", "-setsid", filepath.Join(dir, "r"), "--", "bash", "-c", script)
				case "named":
					r = helper(t, append([]string{"reaper", filepath.Join(dir, "r"), "--", "ojhelper", "spawnexit", "-name", filepath.Join(dir, "s"), "--"}, runArgs...)...)
				}
				spawnerGoneCase(t, root, dir, r, runErr)
			})
		}
	}
}

func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// TestSpawnerDiesWhileCMDRuns (issue 13): the spawner is SIGKILLed while CMD
// runs. run notices on the spawner's pidfd, notes the reason in CMD's record
// (`status` shows it while the tree ends), ends the tree and exits 4. The
// time from the spawner's death to CMD's end is measured (CMD exits on
// SIGTERM); a second CMD ignores SIGTERM, so the note can be read during its
// grace period.
func TestSpawnerDiesWhileCMDRuns(t *testing.T) {
	for _, mode := range cgroupModes {
		for _, ignore := range []bool{false, true} {
			t.Run(fmt.Sprintf("cgroup=%s/ignore-term=%v", mode, ignore), func(t *testing.T) {
				t.Parallel()
				root := newRoot(t)
				dir := workDir(t)
				sleepArgs := []string{"ojhelper", "sleep", filepath.Join(dir, "cmd")}
				if ignore {
					sleepArgs = append(sleepArgs, "-ignore-term")
				}
				r := helper(t, append([]string{"reaper", filepath.Join(dir, "r"), "--", "ojhelper", "spawn", filepath.Join(dir, "w"), "--",
					"ownerjournal", "run", "--root", root, "--cgroup", mode, "--grace", "1s", "--"}, sleepArgs...)...)
				r.await(t, filepath.Join(dir, "cmd.id"))
				wID, cmdID := mustID(t, filepath.Join(dir, "w.id")), mustID(t, filepath.Join(dir, "cmd.id"))
				_, err := awaitRecord(root, cmdID, r.pidfd)
				require.NoError(t, err)
				w, err := owner.Open(wID)
				require.NoError(t, err)
				defer w.Close()
				cmdP, err := owner.Open(cmdID)
				require.NoError(t, err)
				defer cmdP.Close()

				require.NoError(t, w.Signal(syscall.SIGKILL))
				ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
				defer cancel()
				require.NoError(t, w.Wait(ctx))
				died := time.Now()
				if ignore {
					r.await(t, filepath.Join(dir, "cmd.sig"))
					stdout, _, _ := oj(t, "status", "--root", root)
					require.Contains(t, stdout, "ending: the spawner is gone", "status says why the tree is ending")
				}
				require.NoError(t, cmdP.Wait(ctx), "CMD must end after its spawner died")
				t.Logf("spawner SIGKILLed -> CMD ended: %v (cgroup=%s, CMD ignores SIGTERM: %v, grace 1s)", time.Since(died).Round(time.Microsecond), mode, ignore)
				got := reaped(t, r, filepath.Join(dir, "r"))
				runID := mustID(t, filepath.Join(dir, "w.child.id"))
				require.Equal(t, exitSpawnerGone, got[runID.PID], "run's exit status (reaped: %v)", got)
				recs, err := readRecords(root)
				require.NoError(t, err)
				require.Empty(t, recs)
			})
		}
	}
}

// nodeSpawner is a Node spawner for TestSpawnerNode. Mode "exit": the main
// thread spawns argv and exits at once. Mode "thread": a worker_threads
// Worker spawns argv (naming the process in OWNERJOURNAL_SPAWNER) and ends
// once DIR/cmd.id exists, while the main thread lives on until DIR/release
// exists. Waits are fs.watch (inotify), never timers.
const nodeSpawner = `
const { Worker, isMainThread } = require('worker_threads');
const { spawn } = require('child_process');
const fs = require('fs');
const path = require('path');
const [mode, dir, ...argv] = process.argv.slice(2);
function whenExists(file, cb) {
  let done = false;
  const check = () => { if (!done && fs.existsSync(file)) { done = true; w.close(); cb(); } };
  const w = fs.watch(path.dirname(file), check);
  check();
}
function start(env) {
  const err = fs.openSync(path.join(dir, 's.err'), 'w');
  spawn(argv[0], argv.slice(1), { stdio: ['ignore', err, err], env });
}
if (mode === 'exit') {
  start(process.env);
  process.exit(0);
} else if (isMainThread) {
  new Worker(__filename, { argv: process.argv.slice(2) });
  whenExists(path.join(dir, 'release'), () => process.exit(0));
} else {
  start({ ...process.env, OWNERJOURNAL_SPAWNER: String(process.pid) });
  whenExists(path.join(dir, 'cmd.id'), () => process.exit(0));
}
`

// TestSpawnerNode (issue 13): a real multi-threaded spawner. Node (libuv
// threads, V8 threads) spawns `ownerjournal run`:
//
//   - exit: from its main thread, then process.exit(0) at once. run ends
//     nothing it started (it starts nothing) and exits 4.
//   - thread: from a worker_threads Worker, which then ends while the Node
//     process lives on. The kernel sends run's parent-death signal when the
//     *thread* that forked it exits (prctl(2)); run must see on the pidfd
//     that the spawner process lives, and keep CMD. When the process exits,
//     CMD's tree ends and run exits 4.
func TestSpawnerNode(t *testing.T) {
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node (Node.js 20+) is required: make prereqs installs it")
	for _, mode := range []string{"exit", "thread"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			root := newRoot(t)
			dir := workDir(t)
			script := filepath.Join(dir, "spawner.js")
			require.NoError(t, os.WriteFile(script, []byte(nodeSpawner), 0o600))
			r := helper(t, "reaper", "-setsid", filepath.Join(dir, "r"), "--", node, script, mode, dir,
				"ownerjournal", "run", "--root", root, "--grace", "1s", "--", "ojhelper", "sleep", filepath.Join(dir, "cmd"))
			runErr := filepath.Join(dir, "s.err")
			if mode == "exit" {
				spawnerGoneCase(t, root, dir, r, runErr)
				return
			}
			r.await(t, filepath.Join(dir, "cmd.id"))
			cmdID := mustID(t, filepath.Join(dir, "cmd.id"))
			err := awaitDir(dir, r.pidfd, func() (bool, error) {
				b, err := os.ReadFile(runErr)
				return strings.Contains(string(b), "lives on"), err
			})
			require.NoError(t, err, "run must notice the worker thread's exit")
			requireAlive(t, cmdID, "CMD, after the spawner's worker thread ended")
			cmdP, err := owner.Open(cmdID)
			require.NoError(t, err)
			defer cmdP.Close()
			require.NoError(t, publishFile(filepath.Join(dir, "release"), nil))
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			require.NoError(t, cmdP.Wait(ctx), "CMD must end when the Node process exits")
			got := reaped(t, r, filepath.Join(dir, "r"))
			var codes []int
			for _, c := range got {
				if c != 0 {
					codes = append(codes, c)
				}
			}
			require.Equal(t, []int{exitSpawnerGone}, codes, "run exits 4 (reaped: %v)", got)
			b, _ := os.ReadFile(runErr)
			t.Logf("run's stderr:\n%s", b)
		})
	}
}
