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
	wallTime(t)
	w := newWorld(t)
	r := w.start("clean", false)
	r.waitWorkers()
	require.Len(t, r.inv.roots, 1, "both workers share the run's root")
	assert.Equal(t, w.base, filepath.Dir(r.inv.roots[0]), "the root is in the private default base")
	r.release()
	require.Equal(t, 0, r.wait(), "npx playwright test exits 0:\n%s", r.output())

	rep, tests := r.report()
	assert.Equal(t, len(allTests), rep.Stats.Expected)
	assert.Zero(t, rep.Stats.Unexpected)
	for _, name := range allTests {
		assert.Equal(t, "passed", tests[name].Status, name)
	}
	lines := r.teardownLines()
	if assert.Len(t, lines, 1, "one summary line") {
		assert.Regexp(t, cleanTeardown, lines[0])
	}
	w.checkNothingLeft(nil, r.inv)
}

// TestPlaywrightWorkerKilled: a worker is SIGKILLed from outside while its
// test holds two tmux sessions; the other worker's test is mid-flight and
// goes on afterwards, the killed worker's file goes on in a new worker,
// and nothing of the killed worker is left.
func TestPlaywrightWorkerKilled(t *testing.T) {
	wallTime(t)
	w := newWorld(t)
	r := w.start("worker-killed", false)
	ws := r.waitWorkers()
	victim, survivor := ws[0], ws[1]

	// Measure when the victim's processes end (its ownerjournal run gets
	// SIGTERM as the worker's death signal and ends the tree).
	vprocs := append([]proc{victim.run, victim.server}, victim.tmux...)
	killed := time.Now()
	collect := exitTimes(vprocs, killed)
	victim.worker.kill(t, unix.SIGKILL)
	require.True(t, victim.worker.waitGone(timeout), "the victim worker is dead")
	// Only now may the survivor's test go on: it was mid-test while its
	// sibling died.
	assert.True(t, survivor.worker.alive(), "the other worker is unaffected")
	r.release()

	status := r.wait()
	for what, d := range collect() {
		t.Logf("%s ended %v after the worker's SIGKILL", what, d.Round(time.Millisecond))
	}
	assert.Equal(t, 1, status, "one test failed: the killed worker's")
	rep, tests := r.report()
	victimTest, survivorTest := victim.title, survivor.title
	assert.Equal(t, 1, rep.Stats.Unexpected, "only the killed worker's test failed")
	assert.NotEqual(t, "passed", tests[victimTest].Status, victimTest)
	t.Logf("the killed worker's test: %s: %s", tests[victimTest].Status, firstLine(tests[victimTest].Error))
	for _, name := range allTests {
		if name != victimTest {
			assert.Equal(t, "passed", tests[name].Status, "%s (the run goes on)", name)
		}
	}
	assert.Equal(t, "passed", tests[survivorTest].Status)
	lines := r.teardownLines()
	if assert.Len(t, lines, 1) {
		assert.Regexp(t, cleanTeardown, lines[0])
		t.Logf("teardown: %s", lines[0])
	}
	w.checkNothingLeft(nil, r.inv)
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
		t.Run(tc.name, func(t *testing.T) {
			wallTime(t)
			w := newWorld(t)
			by := w.liveRoot("bystander")

			r1 := w.start("killed", false)
			ws := r1.waitWorkers()
			runner := r1.runner()
			var owners []proc
			for _, wi := range ws {
				owners = append(owners, wi.worker, wi.run)
			}
			collect := exitTimes(owners, time.Now())
			if tc.group {
				r1.signalGroup(unix.SIGKILL)
			} else {
				runner.kill(t, unix.SIGKILL)
			}
			r1.wait()
			// Owners first: the workers (on IPC disconnect they tear their
			// fixtures down) and the ownerjournal run supervisors.
			for _, p := range owners {
				require.True(t, p.waitGone(timeout), "%v exits", p)
			}
			for what, d := range collect() {
				t.Logf("%s ended %v after the SIGKILL", what, d.Round(time.Millisecond))
			}
			// What the dead run left: at least its root.
			root1 := r1.inv.roots[0]
			require.DirExists(t, root1, "the killed run left its root")
			var orphans []string
			for _, wi := range ws {
				for _, p := range append([]proc{wi.server}, wi.tmux...) {
					if p.alive() {
						orphans = append(orphans, p.String())
					}
				}
			}
			t.Logf("left by the killed run: root %s, %d live process(es) %v, records %v", root1, len(orphans), orphans, entries(t, filepath.Join(root1, "records")))
			if tc.group {
				assert.NotEmpty(t, orphans, "tmux servers outlive a SIGKILLed group (the test must give recovery real work)")
			}

			r2 := w.start("next", false, holdOnly...)
			r2.waitWorkers()
			r2.release()
			require.Equal(t, 0, r2.wait(), "the next run passes:\n%s", r2.output())
			stale := staleLine(r2.output())
			require.NotEmpty(t, stale, "the next run's globalSetup reports the other roots:\n%s", r2.output())
			t.Logf("next run's globalSetup: %s", stale)
			assert.Contains(t, stale, "2 other root(s)")
			assert.Contains(t, stale, "1 stale removed")
			assert.Contains(t, stale, "1 in use (kept)")
			assert.Contains(t, stale, "0 retained, 0 failed")
			if lines := r2.teardownLines(); assert.Len(t, lines, 1) {
				assert.Regexp(t, cleanTeardown, lines[0])
			}
			w.checkNothingLeft([]string{"bystander"}, r1.inv, r2.inv)
			by.checkIntact(t)
			by.end(t, w)
			w.checkNothingLeft(nil)
		})
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
		{"back to back", func(r *pwRun) { r.signalGroup(unix.SIGINT) }},
		{"during teardown", func(r *pwRun) {
			testroot.WaitFilePidfd(r.t, filepath.Join(r.sync, "teardown.json"), r.pidfd, timeout)
			r.signalGroup(unix.SIGINT)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wallTime(t)
			w := newWorld(t)
			r := w.start("sigint", false)
			r.waitWorkers()
			r.signalGroup(unix.SIGINT)
			tc.second(r)
			status := r.wait()
			t.Logf("npx exit status %d", status)
			assert.NotEqual(t, 0, status, "an interrupted run does not pass")
			lines := r.teardownLines()
			if assert.Len(t, lines, 1, "recovery ran once:\n%s", r.output()) {
				t.Logf("%s", lines[0])
				// A Ctrl-C can land on the recover child before its Go
				// runtime has installed its handlers; the helper then runs
				// recovery again and says so.
				assert.Regexp(t, `: (exit 0|exit 130); .*, 0 retained, root removed(; \d+ earlier attempt\(s\) killed by [A-Z, ]+ before they caught signals)?; \d+ ms$`, lines[0])
			}
			w.checkNothingLeft(nil, r.inv)
		})
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
			r := w.start("dies", false)
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
	r := w.start("retains", false, holdOnly...)
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
