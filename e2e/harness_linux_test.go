package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/procenv"
	"github.com/ownerjournal/ownerjournal/internal/testroot"
)

// timeout bounds every wait. It is a safety net that turns a hang into a
// failure; nothing waits for it to pass.
const timeout = 90 * time.Second

// Built once by TestMain.
var (
	repoDir   string // the module root
	ojBin     string // the ownerjournal CLI
	serverBin string // cmd/e2e-server
)

// nodeRunner is a Node test runner whose project in testdata/ the tests
// drive: the same scenarios, the same checks.
type nodeRunner struct {
	name    string
	project string   // the directory under testdata/
	argv    []string // after `npx --no`
	// packed: the project installs the tarballs of `make npm` (the binary
	// comes from its platform package): its runs get a PATH with no go and
	// no ownerjournal on it, and no OWNERJOURNAL_BIN.
	packed bool
	// reportArgs asks for a JSON report in file.
	reportArgs func(file string) []string
	tests      []string // every test's title
	holdOnly   []string // arguments that select the two hold tests
}

func (rn *nodeRunner) dir() string { return filepath.Join(repoDir, "testdata", rn.project) }

var (
	playwright = &nodeRunner{name: "Playwright", project: "playwright", argv: []string{"playwright", "test"},
		tests: allTests, holdOnly: holdOnly}
	jest = &nodeRunner{name: "Jest", project: "jest", argv: []string{"jest"}, packed: true,
		reportArgs: func(f string) []string { return []string{"--json", "--outputFile=" + f} },
		tests:      kitTests, holdOnly: []string{"-t", "sessions live until the run releases them"}}
	vitest = &nodeRunner{name: "Vitest", project: "vitest", argv: []string{"vitest", "run"}, packed: true,
		reportArgs: func(f string) []string {
			return []string{"--reporter=default", "--reporter=json", "--outputFile.json=" + f}
		},
		tests: kitTests, holdOnly: []string{"-t", "sessions live until the run releases them"}}
	nodeRunners = []*nodeRunner{playwright, jest, vitest}
)

// kitTests are the tests of testdata/nodekit/kit.js, in each of the Jest
// and Vitest projects.
var kitTests = []string{
	"a: sessions live until the run releases them", "a: DELETE ends a session",
	"b: sessions live until the run releases them", "b: DELETE ends a session",
}

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	// A missing prerequisite fails the tests loudly; it is never a skip.
	for _, tool := range []string{"node", "npm", "npx", "go", "tmux"} {
		if _, err := exec.LookPath(tool); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %s is required by the Playwright end-to-end tests and was not found on PATH: %v\n", tool, err)
			return 1
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	repoDir = filepath.Dir(wd)
	if err := checkPacked(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	bin, err := os.MkdirTemp("", "ojpwbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(bin)
	ojBin, serverBin = filepath.Join(bin, "ownerjournal"), filepath.Join(bin, "e2e-server")
	steps := []struct {
		dir  string
		argv []string
	}{
		// Real binaries, built once: never `go run`, whose wrapper PID is
		// not the server's.
		{repoDir, []string{"go", "build", "-o", bin + "/", "./cmd/ownerjournal", "./cmd/e2e-server"}},
	}
	for _, rn := range nodeRunners {
		// Exactly the packages of the committed lock file.
		steps = append(steps, struct {
			dir  string
			argv []string
		}{rn.dir(), []string{"npm", "ci", "--no-audit", "--no-fund", "--prefer-offline"}})
	}
	for _, s := range steps {
		t0 := time.Now()
		cmd := exec.Command(s.argv[0], s.argv[1:]...)
		cmd.Dir = s.dir
		cmd.Env = append(os.Environ(), npmQuiet...)
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %s (in %s): %v\n%s", strings.Join(s.argv, " "), s.dir, err, out)
			return 1
		}
		fmt.Fprintf(os.Stderr, "e2e: %s: %v\n", strings.Join(s.argv, " "), time.Since(t0).Round(time.Millisecond))
	}
	return m.Run()
}

// checkPacked checks what the projects that install the packed tarballs
// need: the tarballs of `make npm`, and lock files without the integrity of
// those tarballs (see js/lock-local.js: with it, npm ci would install an
// older build from its cache).
func checkPacked() error {
	for _, rn := range nodeRunners {
		if !rn.packed {
			continue
		}
		b, err := os.ReadFile(filepath.Join(rn.dir(), "package-lock.json"))
		if err != nil {
			return err
		}
		var lock struct {
			Packages map[string]struct{ Resolved, Integrity string }
		}
		if err := json.Unmarshal(b, &lock); err != nil {
			return fmt.Errorf("%s/package-lock.json: %w", rn.project, err)
		}
		for name, p := range lock.Packages {
			if !strings.HasPrefix(p.Resolved, "file:") {
				continue
			}
			if p.Integrity != "" {
				return fmt.Errorf("%s/package-lock.json: %s has an integrity: run `node js/lock-local.js` on it (or `make npm-lock`)", rn.project, name)
			}
			tgz := filepath.Join(rn.dir(), strings.TrimPrefix(p.Resolved, "file:"))
			if _, err := os.Stat(tgz); err != nil {
				return fmt.Errorf("%s installs %s: %w: run `make npm` first", rn.project, p.Resolved, err)
			}
		}
	}
	return nil
}

// pathWithout returns PATH without the directories that hold one of names.
func pathWithout(names ...string) string {
	var keep []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		found := false
		for _, n := range names {
			if fi, err := os.Stat(filepath.Join(dir, n)); err == nil && !fi.IsDir() {
				found = true
			}
		}
		if !found && dir != "" {
			keep = append(keep, dir)
		}
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

// npmQuiet keeps npm from writing log files under ~/.npm and from asking
// the registry for updates.
var npmQuiet = []string{"npm_config_logs_max=0", "npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false"}

// --- /proc -----------------------------------------------------------------

// stat is what the tests read from /proc/PID/stat.
type stat struct {
	state           byte
	ppid, pgrp, sid int
	start           uint64 // field 22: start time in clock ticks since boot
}

// readStat parses /proc/PID/stat after the last ')' (the command name may
// hold spaces and parentheses).
func readStat(pid int) (stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return stat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var s stat
	s.state = f[0][0]
	s.ppid, _ = strconv.Atoi(f[1])
	s.pgrp, _ = strconv.Atoi(f[2])
	s.sid, _ = strconv.Atoi(f[3])
	s.start, err = strconv.ParseUint(f[19], 10, 64)
	return s, err
}

// proc is a process identified by PID and start time: a PID alone is not
// an identity.
type proc struct {
	What  string
	PID   int
	Start uint64
}

func (p proc) String() string { return fmt.Sprintf("%s (pid %d)", p.What, p.PID) }

// procOf snapshots the identity of a live process.
func procOf(t *testing.T, pid int, what string) proc {
	t.Helper()
	s, err := readStat(pid)
	require.NoError(t, err, "%s: pid %d", what, pid)
	require.NotContains(t, "ZX", string(s.state), "%s: pid %d is not running", what, pid)
	return proc{What: what, PID: pid, Start: s.start}
}

// alive reports whether p still runs: /proc/PID exists with the same start
// time and is not a zombie.
func (p proc) alive() bool {
	s, err := readStat(p.PID)
	return err == nil && s.start == p.Start && s.state != 'Z' && s.state != 'X'
}

// open returns a pidfd on p, verified after opening (so that a reused PID
// is never mistaken for p); ok is false when p is gone.
func (p proc) open() (fd int, ok bool, err error) {
	fd, err = unix.PidfdOpen(p.PID, 0)
	if errors.Is(err, unix.ESRCH) {
		return -1, false, nil
	}
	if err != nil {
		return -1, false, os.NewSyscallError("pidfd_open", err)
	}
	if !p.alive() {
		unix.Close(fd)
		return -1, false, nil
	}
	return fd, true, nil
}

// kill sends sig to p through a verified pidfd.
func (p proc) kill(t *testing.T, sig unix.Signal) {
	t.Helper()
	fd, ok, err := p.open()
	require.NoError(t, err)
	require.True(t, ok, "%v is gone before it could be sent %v", p, sig)
	defer unix.Close(fd)
	require.NoError(t, unix.PidfdSendSignal(fd, sig, nil, 0), "signal %v", p)
}

// waitGone waits, on a pidfd, until p has exited (or is a zombie). It
// returns false if p still runs after d.
func (p proc) waitGone(d time.Duration) bool {
	fd, ok, err := p.open()
	if err != nil || !ok {
		return !p.alive()
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return !p.alive()
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if err == nil && n > 0 || !p.alive() {
			return true
		}
	}
}

// markedProcs lists the live processes whose initial environment holds
// marker (KEY=VALUE): everything a run started inherits the run's private
// XDG_RUNTIME_DIR, so this finds what a run left whatever its PID.
func markedProcs(marker string) []proc {
	var out []proc
	for _, pid := range procenv.Marked(marker) {
		s, err := readStat(pid)
		if err != nil || s.state == 'Z' || s.state == 'X' {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		out = append(out, proc{What: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")), PID: pid, Start: s.start})
	}
	return out
}

// --- files -------------------------------------------------------------

// touch publishes an empty file atomically.
func touch(t *testing.T, path string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	require.NoError(t, os.WriteFile(tmp, nil, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// entries lists the names in dir (none if it does not exist).
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// --- the scenario's world ------------------------------------------------

// world is one scenario's private machine: a fresh XDG_RUNTIME_DIR (so the
// default base of roots is private to the test) and bystanders that must
// survive everything the scenario does.
type world struct {
	t    *testing.T
	xdg  string // XDG_RUNTIME_DIR of every run
	base string // $XDG_RUNTIME_DIR/ownerjournal, the default base

	devTmux   proc   // a developer's tmux server outside any root
	devSocket string //
	sleeper   proc   // an unrelated process
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, xdg: testroot.PrivateDir(t, "ojx")}
	w.base = filepath.Join(w.xdg, "ownerjournal")
	// Last cleanup registered runs first: end whatever a failed test left
	// (as the next run's recovery would) before the directory goes.
	t.Cleanup(w.scrub)

	devDir := testroot.PrivateDir(t, "ojd")
	w.devSocket = filepath.Join(devDir, "dev")
	w.devTmux = startTmux(t, w.devSocket, "developer's tmux server")
	w.sleeper = startProc(t, "sleep", "3600")
	return w
}

// startTmux starts a tmux server on socket with a scrubbed environment and
// returns it; it is killed at cleanup.
func startTmux(t *testing.T, socket, what string) proc {
	t.Helper()
	env := []string{"PATH=/usr/bin:/bin", "HOME=/", "TERM=xterm"}
	cmd := exec.Command("tmux", "-S", socket, "-f", "/dev/null", "new-session", "-d", "-s", "bystander")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "tmux new-session: %s", out)
	t.Cleanup(func() {
		k := exec.Command("tmux", "-S", socket, "kill-server")
		k.Env = env
		k.Run()
	})
	cmd = exec.Command("tmux", "-S", socket, "display-message", "-p", "#{pid}")
	cmd.Env = env
	out, err = cmd.Output()
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	require.NoError(t, err)
	return procOf(t, pid, what)
}

// marker is the environment entry every process of this world's runs has.
func (w *world) marker() string { return "XDG_RUNTIME_DIR=" + w.xdg }

// oj runs the ownerjournal CLI in this world's environment.
func (w *world) oj(args ...string) (string, int) {
	cmd := exec.Command(ojBin, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", w.marker()}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode()
	default:
		return err.Error(), -1
	}
}

// scrub ends whatever a failed scenario left: recover --all on every root
// in the base, then SIGKILL any process still carrying the marker.
func (w *world) scrub() {
	for _, n := range entries(w.t, w.base) {
		w.oj("recover", "--all", "--grace", "1s", "--root", filepath.Join(w.base, n))
	}
	for _, p := range markedProcs(w.marker()) {
		if fd, ok, _ := p.open(); ok {
			unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			unix.Close(fd)
		}
	}
}

// checkBystanders asserts that the developer's tmux server and the
// unrelated process were not touched.
func (w *world) checkBystanders() {
	t := w.t
	t.Helper()
	assert.True(t, w.devTmux.alive(), "%v survives", w.devTmux)
	fi, err := os.Lstat(w.devSocket)
	if assert.NoError(t, err, "the developer's tmux socket survives") {
		assert.Equal(t, fs.ModeSocket, fi.Mode().Type())
	}
	assert.True(t, w.sleeper.alive(), "%v survives", w.sleeper)
}

// checkNothingLeft asserts, from /proc and the filesystem, that nothing
// the runs started is left: no process in invs, no process with the
// world's marker, no socket, and no root in the base but keep.
func (w *world) checkNothingLeft(keep []string, invs ...*inventory) {
	t := w.t
	t.Helper()
	for _, inv := range invs {
		for _, p := range inv.procs {
			assert.False(t, p.alive(), "%v is gone", p)
		}
		for _, s := range inv.sockets {
			_, err := os.Lstat(s)
			assert.ErrorIs(t, err, fs.ErrNotExist, "socket %s is gone", s)
		}
		for _, r := range inv.roots {
			if !contains(keep, filepath.Base(r)) {
				_, err := os.Lstat(r)
				assert.ErrorIs(t, err, fs.ErrNotExist, "root %s is gone", r)
			}
		}
	}
	assert.Empty(t, markedProcs(w.marker()), "no process of the run is left")
	left := entries(t, w.base)
	if keep == nil {
		keep = []string{}
	}
	assert.ElementsMatch(t, keep, nonNil(left), "roots left in %s", w.base)
	w.checkBystanders()
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// --- a Playwright run ------------------------------------------------------

// session and workerReady mirror what tests/fixtures.js hold() writes.
type session struct {
	ID     string `json:"id"`
	Socket string `json:"socket"`
	PID    int    `json:"pid"`
}

type workerReady struct {
	ParallelIndex int       `json:"parallelIndex"`
	WorkerIndex   int       `json:"workerIndex"`
	WorkerPID     int       `json:"workerPid"`
	RunnerPID     int       `json:"runnerPid"`
	Root          string    `json:"root"`
	RunPID        int       `json:"runPid"`
	ServerPID     int       `json:"serverPid"`
	Addr          string    `json:"addr"`
	Title         string    `json:"title"`
	Sessions      []session `json:"sessions"`
}

// inventory is what one run started, as identities taken while it ran.
type inventory struct {
	runner  proc
	workers map[int]workerInventory // by parallel index
	procs   []proc
	sockets []string
	roots   []string
}

type workerInventory struct {
	title               string // the hold test's title
	worker, run, server proc
	tmux                []proc
}

// pwRun is one run of a Node test runner (`npx playwright test`, `npx
// jest`, `npx vitest run`) in its own process group (as a terminal's
// foreground job would be).
type pwRun struct {
	t      *testing.T
	w      *world
	rn     *nodeRunner
	name   string
	cmd    *exec.Cmd
	pidfd  int // npx's pidfd, held for the run's life
	sync   string
	out    *testroot.Buffer // what the run printed
	tsOut  *testroot.Buffer // the same, each line stamped with the time since start
	done   chan struct{}
	status int // exit status, 128+n if signalled
	inv    *inventory
}

// start starts a run of rn in world w: `npx playwright test ARGS...` for
// Playwright. release says whether the hold tests go on at once (the
// release file exists before the run starts).
func (w *world) start(rn *nodeRunner, name string, release bool, args ...string) *pwRun {
	t := w.t
	t.Helper()
	r := &pwRun{t: t, w: w, rn: rn, name: name, sync: testroot.PrivateDir(t, "ojs"), out: &testroot.Buffer{}, tsOut: &testroot.Buffer{}, done: make(chan struct{}), inv: &inventory{workers: map[int]workerInventory{}}}
	if release {
		touch(t, filepath.Join(r.sync, "release"))
	}
	env := append(procenv.Scrubbed(os.Environ()), npmQuiet...)
	if rn.packed {
		path := pathWithout("go", "ownerjournal")
		require.NotEqual(t, os.Getenv("PATH"), path, "go is on PATH, so the packed run must not have it")
		for i, kv := range env {
			if strings.HasPrefix(kv, "PATH=") {
				env[i] = "PATH=" + path
			}
		}
	} else {
		env = append(env, "OWNERJOURNAL_BIN="+ojBin)
	}
	if rn.reportArgs != nil {
		args = append(rn.reportArgs(filepath.Join(r.sync, "report.json")), args...)
	}
	// The runners' own temp files (Vite's ssr dirs, Node's) go to a
	// directory the test owns and removes: a SIGKILLed run cannot.
	tmp := filepath.Join(r.sync, "tmp")
	require.NoError(t, os.Mkdir(tmp, 0o700))
	env = append(env,
		w.marker(),
		"TMPDIR="+tmp,
		"OJ_E2E_SERVER="+serverBin,
		"OJ_PW_SYNC="+r.sync,
		"OJ_PW_OUTPUT="+filepath.Join(r.sync, "out"),
		"OJ_PW_REPORT="+filepath.Join(r.sync, "report.json"),
		"NO_COLOR=1",
	)
	// "--": npx would take the runner's options (--json, --outputFile) as
	// npm's own.
	argv := append([]string{"--no", "--"}, rn.argv...)
	r.cmd = exec.Command("npx", append(argv, args...)...)
	r.cmd.Dir = rn.dir()
	r.cmd.Env = env
	out := &stampWriter{start: time.Now(), raw: r.out, stamped: r.tsOut}
	r.cmd.Stdout, r.cmd.Stderr = out, out
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, r.cmd.Start())
	fd, err := unix.PidfdOpen(r.cmd.Process.Pid, 0)
	require.NoError(t, err)
	r.pidfd = fd
	go func() {
		r.cmd.Wait()
		r.status = exitStatus(r.cmd.ProcessState)
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			unix.Kill(-r.cmd.Process.Pid, unix.SIGKILL)
			<-r.done
		}
		unix.Close(r.pidfd)
		if t.Failed() || os.Getenv("OJ_E2E_SHOW_OUTPUT") != "" {
			t.Logf("run %s output:\n%s", r.name, r.tsOut.String())
			for _, f := range entries(t, filepath.Join(r.sync, "out")) {
				if b, err := os.ReadFile(filepath.Join(r.sync, "out", f)); err == nil {
					t.Logf("%s:\n%s", f, b)
				}
			}
		}
	})
	return r
}

func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// runner waits for the runner's announcement (global-setup.js) and returns
// the Playwright runner process: the node process that runs the global
// hooks and forks the workers.
func (r *pwRun) runner() proc {
	t := r.t
	t.Helper()
	if r.inv.runner.PID != 0 {
		return r.inv.runner
	}
	var rn struct{ PID, PPID int }
	require.NoError(t, json.Unmarshal(testroot.WaitFilePidfd(t, filepath.Join(r.sync, "runner.json"), r.pidfd, timeout), &rn))
	r.inv.runner = procOf(t, rn.PID, "Playwright runner")
	r.inv.procs = append(r.inv.procs, r.inv.runner)
	return r.inv.runner
}

// waitWorkers waits until both workers hold their sessions and records
// every process and socket they report, with identities taken while the
// hold tests keep them alive.
func (r *pwRun) waitWorkers() map[int]workerInventory {
	t := r.t
	t.Helper()
	runner := r.runner()
	for i := range 2 {
		var wr workerReady
		require.NoError(t, json.Unmarshal(testroot.WaitFilePidfd(t, filepath.Join(r.sync, fmt.Sprintf("ready-%d.json", i)), r.pidfd, timeout), &wr))
		wi := workerInventory{
			title:  wr.Title,
			worker: procOf(t, wr.WorkerPID, fmt.Sprintf("worker %d", i)),
			run:    procOf(t, wr.RunPID, fmt.Sprintf("ownerjournal run of worker %d", i)),
			server: procOf(t, wr.ServerPID, fmt.Sprintf("e2e-server of worker %d", i)),
		}
		require.Equal(t, runner.PID, wr.RunnerPID, "worker %d is a child of the runner", i)
		s, err := readStat(wr.RunPID)
		require.NoError(t, err)
		require.Equal(t, wr.WorkerPID, s.ppid, "ownerjournal run is the worker's child")
		for _, ses := range wr.Sessions {
			wi.tmux = append(wi.tmux, procOf(t, ses.PID, fmt.Sprintf("tmux server %s of worker %d", ses.ID, i)))
			r.inv.sockets = append(r.inv.sockets, ses.Socket)
		}
		require.NotEmpty(t, wi.tmux)
		r.inv.workers[i] = wi
		r.inv.procs = append(r.inv.procs, wi.worker, wi.run, wi.server)
		r.inv.procs = append(r.inv.procs, wi.tmux...)
		if !contains(r.inv.roots, wr.Root) {
			r.inv.roots = append(r.inv.roots, wr.Root)
		}
	}
	return r.inv.workers
}

// release lets the hold tests go on.
func (r *pwRun) release() { touch(r.t, filepath.Join(r.sync, "release")) }

// signalGroup signals the run's whole process group, as a terminal does
// for Ctrl-C.
func (r *pwRun) signalGroup(sig unix.Signal) {
	r.t.Helper()
	require.NoError(r.t, unix.Kill(-r.cmd.Process.Pid, sig))
}

// wait waits for npx to exit and returns its exit status.
func (r *pwRun) wait() int {
	r.t.Helper()
	select {
	case <-r.done:
	case <-time.After(timeout):
		unix.Kill(-r.cmd.Process.Pid, unix.SIGKILL)
		<-r.done
		require.FailNow(r.t, "timeout", "run %s did not end within %v", r.name, timeout)
	}
	return r.status
}

// output is what npx, the runner and the workers printed.
func (r *pwRun) output() string { return r.out.String() }

// teardownLines returns the summary lines ownerjournal's teardown printed.
func (r *pwRun) teardownLines() []string {
	var out []string
	for _, l := range strings.Split(r.output(), "\n") {
		if strings.HasPrefix(l, "ownerjournal: recover --all ") {
			out = append(out, l)
		}
	}
	return out
}

// --- Playwright's JSON report ------------------------------------------

type pwReport struct {
	Suites []pwSuite `json:"suites"`
	Stats  struct {
		Expected   int `json:"expected"`
		Unexpected int `json:"unexpected"`
		Flaky      int `json:"flaky"`
		Skipped    int `json:"skipped"`
	} `json:"stats"`
	Errors []struct {
		Message string `json:"message"`
	} `json:"errors"`
}

type pwSuite struct {
	Title  string    `json:"title"`
	Specs  []pwSpec  `json:"specs"`
	Suites []pwSuite `json:"suites"`
}

type pwSpec struct {
	Title string `json:"title"`
	Tests []struct {
		Status  string `json:"status"`
		Results []struct {
			Status string `json:"status"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		} `json:"results"`
	} `json:"tests"`
}

// testResult is one test's outcome: its last result's status and error.
type testResult struct {
	Status string
	Error  string
}

// report reads the JSON report and returns every test's outcome by title.
func (r *pwRun) report() (*pwReport, map[string]testResult) {
	t := r.t
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.sync, "report.json"))
	require.NoError(t, err, "Playwright's JSON report")
	var rep pwReport
	require.NoError(t, json.Unmarshal(b, &rep))
	out := map[string]testResult{}
	var walk func([]pwSuite)
	walk = func(ss []pwSuite) {
		for _, s := range ss {
			for _, sp := range s.Specs {
				for _, tt := range sp.Tests {
					res := testResult{Status: "not run"}
					if n := len(tt.Results); n > 0 {
						res.Status = tt.Results[n-1].Status
						if e := tt.Results[n-1].Error; e != nil {
							res.Error = e.Message
						}
					}
					out[sp.Title] = res
				}
			}
			walk(s.Suites)
		}
	}
	walk(rep.Suites)
	return &rep, out
}

// jestReport is the part of Jest's JSON report (--json) that the tests
// read; Vitest's json reporter writes the same shape.
type jestReport struct {
	TestResults []struct {
		Name             string `json:"name"`
		Message          string `json:"message"`
		AssertionResults []struct {
			Title           string   `json:"title"`
			Status          string   `json:"status"`
			FailureMessages []string `json:"failureMessages"`
		} `json:"assertionResults"`
	} `json:"testResults"`
}

// results returns every test's outcome by title from the run's JSON
// report; a test of a file that failed to run has the file's message.
func (r *pwRun) results() map[string]testResult {
	t := r.t
	t.Helper()
	if r.rn.reportArgs == nil {
		_, out := r.report()
		return out
	}
	b, err := os.ReadFile(filepath.Join(r.sync, "report.json"))
	require.NoError(t, err, "%s's JSON report", r.rn.name)
	var rep jestReport
	require.NoError(t, json.Unmarshal(b, &rep))
	out := map[string]testResult{}
	for _, f := range rep.TestResults {
		for _, a := range f.AssertionResults {
			out[a.Title] = testResult{Status: a.Status, Error: strings.Join(a.FailureMessages, "\n")}
		}
		if len(f.AssertionResults) == 0 {
			out[f.Name] = testResult{Status: "failed to run", Error: f.Message}
		}
	}
	return out
}

// --- misc ----------------------------------------------------------------

// execCommand is exec.Command with a scrubbed environment.
func execCommand(argv ...string) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	return cmd
}

// stampWriter copies what a run prints to raw, and to stamped with each
// line prefixed by the time since the run started.
type stampWriter struct {
	mu      sync.Mutex
	start   time.Time
	raw     *testroot.Buffer
	stamped *testroot.Buffer
	midLine bool
}

func (s *stampWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raw.Write(p)
	n := len(p)
	for len(p) > 0 {
		if !s.midLine {
			fmt.Fprintf(s.stamped, "[%6.2fs] ", time.Since(s.start).Seconds())
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.stamped.Write(p)
			s.midLine = true
			break
		}
		s.stamped.Write(p[:i+1])
		s.midLine = false
		p = p[i+1:]
	}
	return n, nil
}

// exitTimes records when each of procs exits, waiting on pidfds in the
// background; call the returned function to collect the delays measured
// from since (a process that is still running has no entry).
func exitTimes(procs []proc, since time.Time) func() map[string]time.Duration {
	var mu sync.Mutex
	got := map[string]time.Duration{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p.waitGoneCtx(ctx) {
				mu.Lock()
				got[p.String()] = time.Since(since)
				mu.Unlock()
			}
		}()
	}
	return func() map[string]time.Duration {
		cancel()
		wg.Wait()
		return got
	}
}

// waitGoneCtx is waitGone until ctx ends.
func (p proc) waitGoneCtx(ctx context.Context) bool {
	fd, ok, err := p.open()
	if err != nil || !ok {
		return !p.alive()
	}
	defer unix.Close(fd)
	for ctx.Err() == nil {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(fds, 50); err == nil && n > 0 {
			return true
		}
	}
	return !p.alive()
}
