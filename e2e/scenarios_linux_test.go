package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The scenarios every Node runner goes through (Playwright, Jest, Vitest):
// the runner-specific tests call them and add what only their runner
// shows.

// fileOf is the test file a test title belongs to: the projects prefix
// every title with its file's name ("a: ...").
func fileOf(title string) string {
	f, _, _ := strings.Cut(title, ":")
	return f
}

// cleanRun: every test passes, ownerjournal's teardown exits 0 and removes
// the root, both workers shared that root, nothing is left.
func cleanRun(t *testing.T, rn *nodeRunner, args ...string) *pwRun {
	wallTime(t)
	w := newWorld(t)
	r := w.start(rn, "clean", false, args...)
	r.waitWorkers()
	require.Len(t, r.inv.roots, 1, "both workers share the run's root")
	assert.Equal(t, w.base, filepath.Dir(r.inv.roots[0]), "the root is in the private default base")
	r.release()
	require.Equal(t, 0, r.wait(), "%s exits 0:\n%s", rn.name, r.output())

	tests := r.results()
	assert.Len(t, tests, len(rn.tests))
	for _, name := range rn.tests {
		assert.Equal(t, "passed", tests[name].Status, name)
	}
	lines := r.teardownLines()
	if assert.Len(t, lines, 1, "one summary line") {
		assert.Regexp(t, cleanTeardown, lines[0])
	}
	w.checkNothingLeft(nil, r.inv)
	return r
}

// workerKilled: a worker is SIGKILLed from outside while its test holds two
// tmux sessions; the other worker's test is mid-flight and goes on
// afterwards; the run fails (the killed worker's test did not pass), its
// teardown is clean and nothing of the killed worker is left. It returns
// the run's results and the victim's hold test.
func workerKilled(t *testing.T, rn *nodeRunner) (map[string]testResult, string) {
	wallTime(t)
	w := newWorld(t)
	r := w.start(rn, "worker-killed", false)
	ws := r.waitWorkers()
	victim, survivor := ws[0], ws[1]

	// Measure when the victim's processes end (its ownerjournal run gets
	// SIGTERM as the worker's death signal and ends the tree).
	vprocs := append([]proc{victim.run, victim.server}, victim.tmux...)
	collect := exitTimes(vprocs, time.Now())
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
	assert.Equal(t, 1, status, "the run fails: the killed worker's test did not pass")
	tests := r.results()
	assert.NotEqual(t, "passed", tests[victim.title].Status, victim.title)
	t.Logf("the killed worker's test: %q", tests[victim.title].Status)
	for _, name := range rn.tests {
		if fileOf(name) == fileOf(survivor.title) {
			assert.Equal(t, "passed", tests[name].Status, "%s (the other worker goes on)", name)
		}
	}
	lines := r.teardownLines()
	if assert.Len(t, lines, 1) {
		assert.Regexp(t, cleanTeardown, lines[0])
		t.Logf("teardown: %s", lines[0])
	}
	w.checkNothingLeft(nil, r.inv)
	return tests, victim.title
}

// runnerKilled: the runner is SIGKILLed (alone, or with its whole process
// group, as a CI timeout does) while the tests own servers with tmux
// sessions (setsid daemons); the next run's globalSetup finds what is left
// in the base and ends it, and leaves another live run's root (live owner,
// live tmux server) untouched.
func runnerKilled(t *testing.T, rn *nodeRunner, group bool) {
	wallTime(t)
	w := newWorld(t)
	by := w.liveRoot("bystander")

	r1 := w.start(rn, "killed", false)
	ws := r1.waitWorkers()
	runner := r1.runner()
	var owners []proc
	for _, wi := range ws {
		owners = append(owners, wi.worker, wi.run)
	}
	collect := exitTimes(owners, time.Now())
	if group {
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
	if group {
		assert.NotEmpty(t, orphans, "tmux servers outlive a SIGKILLed group (the test must give recovery real work)")
	}

	r2 := w.start(rn, "next", false, rn.holdOnly...)
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
}

// doubleSIGINT: a user presses Ctrl-C twice (SIGINT to the run's
// foreground process group, the second one sent by second); cleanup
// completes all the same, once.
func doubleSIGINT(t *testing.T, rn *nodeRunner, second func(r *pwRun)) {
	wallTime(t)
	w := newWorld(t)
	r := w.start(rn, "sigint", false)
	r.waitWorkers()
	r.signalGroup(unix.SIGINT)
	second(r)
	status := r.wait()
	t.Logf("npx exit status %d", status)
	assert.NotEqual(t, 0, status, "an interrupted run does not pass")
	lines := r.teardownLines()
	if assert.Len(t, lines, 1, "recovery ran once:\n%s", r.output()) {
		t.Logf("%s", lines[0])
		// A Ctrl-C can land on the recover child before its Go runtime has
		// installed its handlers; the helper then runs recovery again and
		// says so.
		assert.Regexp(t, `: (exit 0|exit 130); .*, 0 retained, root removed(; \d+ earlier attempt\(s\) killed by [A-Z, ]+ before they caught signals)?; \d+ ms$`, lines[0])
	}
	w.checkNothingLeft(nil, r.inv)
}

// backToBack sends the second Ctrl-C at once.
func backToBack(r *pwRun) { r.signalGroup(unix.SIGINT) }

// TestJest: the Jest project (testdata/jest), installed from the packed
// tarballs and run with no go and no ownerjournal on PATH, through every
// scenario: its jest.config.js names ownerjournal/global-setup and
// ownerjournal/global-teardown and nothing else of ownerjournal.
func TestJest(t *testing.T) { testPackedRunner(t, jest) }

// TestVitest: the same for the Vitest project (testdata/vitest), whose
// vitest.config.mjs names ownerjournal/vitest as globalSetup, with the
// default pool (forks) and, for a clean run, the threads pool (workers are
// threads of the runner process: they inherit the root all the same).
func TestVitest(t *testing.T) {
	testPackedRunner(t, vitest)
	t.Run("clean run, threads pool", func(t *testing.T) { cleanRun(t, vitest, "--pool=threads") })
}

func testPackedRunner(t *testing.T, rn *nodeRunner) {
	t.Run("clean run", func(t *testing.T) {
		r := cleanRun(t, rn)
		assert.NotContains(t, r.output(), "OWNERJOURNAL_BIN", "the binary came from the platform package")
	})
	t.Run("worker killed", func(t *testing.T) { workerKilled(t, rn) })
	t.Run("whole process group killed", func(t *testing.T) { runnerKilled(t, rn, true) })
	t.Run("Ctrl-C twice", func(t *testing.T) { doubleSIGINT(t, rn, backToBack) })
}
