package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
)

// The project's tests (testdata/playwright/tests/*.spec.js).
var (
	holdA    = "a: sessions live until the run releases them"
	holdB    = "b: sessions live until the run releases them"
	allTests = []string{
		holdA, "a: DELETE ends a session", "a: reset ends every session",
		holdB, "b: healthz answers", "b: an unknown session is not found", "b: a session left running is ended with its server",
	}
)

// holdOnly selects the two hold tests, for runs whose other tests add
// nothing to the scenario.
var holdOnly = []string{"--grep", "sessions live until the run releases them"}

// A clean summary line of ownerjournal's globalTeardown.
var cleanTeardown = regexp.MustCompile(`^ownerjournal: recover --all \S+ \(globalTeardown\): exit 0; .*, 0 retained, root removed; \d+ ms$`)

func wallTime(t *testing.T) {
	t0 := time.Now()
	t.Cleanup(func() { t.Logf("wall time of %s: %v", t.Name(), time.Since(t0).Round(time.Millisecond)) })
}

// TestPlaywrightCleanRun: all tests pass, ownerjournal's teardown exits 0
// and removes the root, nothing is left.
func TestPlaywrightCleanRun(t *testing.T) {
	r := cleanRun(t, playwright)
	rep, _ := r.report()
	assert.Equal(t, len(allTests), rep.Stats.Expected)
	assert.Zero(t, rep.Stats.Unexpected)
}

// TestPlaywrightWorkerKilled: a worker is SIGKILLed from outside while its
// test holds two tmux sessions; the other worker's test is mid-flight and
// goes on afterwards, the killed worker's file goes on in a new worker,
// and nothing of the killed worker is left.
func TestPlaywrightWorkerKilled(t *testing.T) {
	tests, victimTest := workerKilled(t, playwright)
	t.Logf("the killed worker's test: %s: %s", tests[victimTest].Status, firstLine(tests[victimTest].Error))
	// The killed worker's file goes on in a new worker: only its test failed.
	for _, name := range allTests {
		if name != victimTest {
			assert.Equal(t, "passed", tests[name].Status, "%s (the run goes on)", name)
		}
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// TestPlaywrightRunnerKilled: the runner is SIGKILLed (alone, or with its
// whole process group, as a CI timeout does); the next run's globalSetup
// finds what is left in the base and ends it, and leaves another live
// run's root (live owner, live tmux server) untouched.
func TestPlaywrightRunnerKilled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		group bool
	}{
		{"runner only", false},
		{"whole process group", true},
	} {
		t.Run(tc.name, func(t *testing.T) { runnerKilled(t, playwright, tc.group) })
	}
}

func staleLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "ownerjournal: ") && strings.Contains(l, "other root(s) in ") {
			return l
		}
	}
	return ""
}

// liveRoot is another run's root in the same base, with a live owner and a
// live tmux server recorded in it.
type liveRoot struct {
	path, socket string
	owner, tmux  proc
	records      []string
}

func (w *world) liveRoot(name string) *liveRoot {
	t := w.t
	t.Helper()
	sl := startSleep(t)
	out, code := w.oj("root", name, "--owner-pid", strconv.Itoa(sl.PID))
	require.Equal(t, 0, code, out)
	lr := &liveRoot{path: strings.TrimSpace(out), owner: sl}
	require.Equal(t, filepath.Join(w.base, name), lr.path)
	lr.socket = filepath.Join(lr.path, "tmux")
	lr.tmux = startTmux(t, lr.socket, "tmux server of the live root")
	out, code = w.oj("publish", "--root", lr.path, "--kind", "tmux", "--pid", strconv.Itoa(lr.tmux.PID),
		"--owner-pid", strconv.Itoa(sl.PID), "--socket", "tmux", "--label", "bystander session")
	require.Equal(t, 0, code, out)
	lr.records = entries(t, filepath.Join(lr.path, "records"))
	require.Len(t, lr.records, 2, "root owner and tmux records")
	return lr
}

func startSleep(t *testing.T) proc {
	t.Helper()
	return startProc(t, "sleep", "3600")
}

func (lr *liveRoot) checkIntact(t *testing.T) {
	t.Helper()
	assert.DirExists(t, lr.path, "the live run's root survives")
	assert.True(t, lr.owner.alive(), "its owner survives")
	assert.True(t, lr.tmux.alive(), "its tmux server survives")
	fi, err := os.Lstat(lr.socket)
	if assert.NoError(t, err, "its socket survives") {
		assert.Equal(t, os.ModeSocket, fi.Mode().Type())
	}
	assert.ElementsMatch(t, lr.records, entries(t, filepath.Join(lr.path, "records")), "its records survive")
}

// end recovers the live root as its own runner would, and checks it is gone.
func (lr *liveRoot) end(t *testing.T, w *world) {
	t.Helper()
	out, code := w.oj("recover", "--all", "--root", lr.path)
	require.Equal(t, 0, code, out)
	assert.NoDirExists(t, lr.path)
	assert.False(t, lr.tmux.alive())
	assert.NoFileExists(t, lr.socket)
}

// TestPlaywrightDoubleSIGINT: a user presses Ctrl-C twice (SIGINT to the
// run's foreground process group, twice); cleanup completes all the same.
func TestPlaywrightDoubleSIGINT(t *testing.T) {
	for _, tc := range []struct {
		name string
		// second sends the second SIGINT.
		second func(r *pwRun)
	}{
		{"back to back", backToBack},
		{"during teardown", func(r *pwRun) {
			testroot.WaitFilePidfd(r.t, filepath.Join(r.sync, "teardown.json"), r.pidfd, timeout)
			r.signalGroup(unix.SIGINT)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { doubleSIGINT(t, playwright, tc.second) })
	}
}

// TestPlaywrightRunnerDies: the runner dies mid-run without reaching
// global teardown, in the two ways JavaScript can see (an uncaught error,
// which exits through 'exit' listeners; a SIGTERM that nothing else
// handles). ownerjournal's safety net recovers the run on the way out.
func TestPlaywrightRunnerDies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kill   func(r *pwRun)
		reason string
		status int
	}{
		{"uncaught error", func(r *pwRun) { touch(r.t, filepath.Join(r.sync, "crash-runner")) },
			"runner exiting with code 1 before globalTeardown", 1},
		{"SIGTERM", func(r *pwRun) { r.runner().kill(r.t, unix.SIGTERM) },
			"SIGTERM with no other handler", 128 + int(unix.SIGTERM)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wallTime(t)
			w := newWorld(t)
			r := w.start(playwright, "dies", false)
			r.waitWorkers()
			tc.kill(r)
			status := r.wait()
			t.Logf("npx exit status %d", status)
			assert.Equal(t, tc.status, status)
			_, err := os.Stat(filepath.Join(r.sync, "teardown.json"))
			assert.ErrorIs(t, err, os.ErrNotExist, "global teardown never ran")
			lines := r.teardownLines()
			if assert.Len(t, lines, 1, "recovery ran once:\n%s", r.output()) {
				t.Logf("%s", lines[0])
				assert.Regexp(t, `^ownerjournal: recover --all \S+ \(`+regexp.QuoteMeta(tc.reason)+`\): exit 0; .*, 0 retained, root removed; \d+ ms$`, lines[0])
			}
			for _, wi := range r.inv.workers {
				assert.True(t, wi.worker.waitGone(timeout), "%v exits", wi.worker)
			}
			w.checkNothingLeft(nil, r.inv)
		})
	}
}

// TestPlaywrightTeardownRetains: when recovery must retain something
// (here a corrupt record), ownerjournal's globalTeardown exits 3, prints
// it, and fails the run although every test passed; the root is kept for
// inspection and nothing else is left.
func TestPlaywrightTeardownRetains(t *testing.T) {
	wallTime(t)
	w := newWorld(t)
	r := w.start(playwright, "retains", false, holdOnly...)
	r.waitWorkers()
	root := r.inv.roots[0]
	corrupt := filepath.Join(root, "records", "planted.json")
	require.NoError(t, os.WriteFile(corrupt, []byte("{not a record"), 0o600))
	r.release()
	assert.Equal(t, 1, r.wait(), "the run fails")
	rep, _ := r.report()
	assert.Equal(t, 2, rep.Stats.Expected, "every test passed")
	assert.Zero(t, rep.Stats.Unexpected)
	lines := r.teardownLines()
	if assert.Len(t, lines, 1) {
		assert.Regexp(t, `^ownerjournal: recover --all \S+ \(globalTeardown\): exit 3; .*1 corrupt.*, [1-9]\d* retained, root kept: `, lines[0])
	}
	assert.Contains(t, r.output(), "something was retained and the root was kept")
	assert.DirExists(t, root, "the root is kept")
	w.checkNothingLeft([]string{filepath.Base(root)}, r.inv)

	require.NoError(t, os.Remove(corrupt))
	out, code := w.oj("recover", "--all", "--root", root)
	require.Equal(t, 0, code, out)
	w.checkNothingLeft(nil, r.inv)
}

// startProc starts an unrelated process with a scrubbed environment; it is
// killed at cleanup.
func startProc(t *testing.T, argv ...string) proc {
	t.Helper()
	cmd := execCommand(argv...)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return procOf(t, cmd.Process.Pid, strings.Join(argv, " "))
}
