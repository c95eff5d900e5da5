package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
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
	"github.com/ownerjournal/ownerjournal/testguard"
)

// envServerChild makes the re-executed test binary run the server's Main
// with its arguments.
const envServerChild = "OJ_E2E_SERVER_CHILD"

// waitTimeout is a safety net that turns a hang into a failure; nothing
// waits for it to pass.
const waitTimeout = 60 * time.Second

// testGrace is the SIGTERM → SIGKILL grace the tests give servers and
// recoveries.
const testGrace = 2 * time.Second

// cliDir holds the ownerjournal CLI built for the tests (see cliBinary).
var (
	cliOnce sync.Once
	cliDir  string
	cliPath string
	cliErr  error
)

func TestMain(m *testing.M) {
	if os.Getenv(envServerChild) == "1" {
		os.Exit(Main(os.Args[1:], os.Stdin, os.Stderr))
	}
	code := testguard.Main(m, testguard.Options{Grace: testGrace})
	if cliDir != "" {
		os.RemoveAll(cliDir)
	}
	os.Exit(code)
}

// cliBinary builds cmd/ownerjournal once per test binary.
func cliBinary(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		if cliDir, cliErr = os.MkdirTemp("", "ojcli"); cliErr != nil {
			return
		}
		cliPath = filepath.Join(cliDir, "ownerjournal")
		cmd := exec.Command(goBin, "build", "-o", cliPath, "github.com/ownerjournal/ownerjournal/cmd/ownerjournal")
		if out, err := cmd.CombinedOutput(); err != nil {
			cliErr = fmt.Errorf("go build cmd/ownerjournal: %w: %s", err, out)
		}
	})
	require.NoError(t, cliErr)
	return cliPath
}

// noExitSleep is the GORACE setting of a re-executed test binary: under
// -race a process sleeps atexit_sleep_ms (1 s by default) before it exits,
// which every server's exit would otherwise cost.
func noExitSleep() string {
	return "GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")
}

// requireTmux fails loudly when tmux is missing: never a skip.
func requireTmux(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("tmux")
	require.NoError(t, err, "tmux is required by these tests (make tmux installs it)")
	return p
}

func hex4() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// admit takes an admission of the test binary's gate.
func admit(t *testing.T) *testguard.Admission {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	adm, err := testguard.Admit(ctx)
	require.NoError(t, err)
	return adm
}

// rootRecords maps a test root's path to its record in the test binary's
// root, which startServer turns into the record of the root's first server.
var rootRecords sync.Map // string → *journal.Record

// newRoot makes a fresh journal root for one server (or two) inside the test
// binary's root, recorded there before it exists: if the test binary is
// signalled, its cleanup ends the servers and removes the root. At the end
// of the test, whatever is left in it is recovered; a test that expects its
// root gone asserts that itself.
//
// The record names the root as its path and, once startServer has started
// it, the root's first server as its subject: recovery ends a record's
// subject before it removes its paths, so the root is never removed under a
// server that is still shutting down. (Records are ended in parallel: a
// separate path record could go first.)
func newRoot(t *testing.T) string {
	t.Helper()
	g := testguard.Root()
	require.NotNil(t, g)
	rel := "r-" + hex4()
	adm := admit(t)
	rec := &journal.Record{Kind: journal.KindPath, Label: "e2e test root " + t.Name(), Paths: []string{rel}, Phase: journal.PhaseLive}
	require.NoError(t, adm.Publish(rec))
	err := g.Dir().Mkdir(rel, 0o700)
	adm.Done()
	require.NoError(t, err)
	path := filepath.Join(g.Path(), rel)
	rootRecords.Store(path, rec)
	t.Cleanup(func() {
		rootRecords.Delete(path)
		if _, err := os.Lstat(path); err == nil {
			if r, err := journal.Open(path); err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
				rep, err := recover.Run(ctx, r, recover.Options{All: true, Grace: testGrace})
				cancel()
				r.Close()
				if err != nil || !rep.Clean() {
					t.Errorf("cleanup: recover %s: %v %+v", path, err, rep)
				}
			}
		}
		if err := g.Retire(rec.ID); err != nil && !errors.Is(err, journal.ErrNotFound) {
			t.Errorf("cleanup: %v", err)
		}
	})
	return path
}

// srvOpts configures one server under test.
type srvOpts struct {
	crashAt string   // OJ_E2E_CRASH_AT
	pauseAt string   // OJ_E2E_PAUSE_AT
	args    []string // extra flags
	env     []string // extra environment
	viaRun  bool     // start it under `ownerjournal run`
	noReady bool     // do not wait for the ready file
}

// srv is a running e2e server: the re-executed test binary.
type srv struct {
	t       *testing.T
	root    string
	cmd     *exec.Cmd // the server, or `ownerjournal run`
	stdin   io.WriteCloser
	stderr  *testroot.Buffer
	markers string
	ready   ready
	proc    *owner.Process // verified handle on the server itself
	waited  chan struct{}
	state   *os.ProcessState
	base    string
	client  *http.Client
}

func startServer(t *testing.T, root string, o srvOpts) *srv {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	readyPath := filepath.Join(dir, "ready.json")
	markers := filepath.Join(dir, "markers")
	require.NoError(t, os.Mkdir(markers, 0o755))
	args := append([]string{"--root", root, "--ready-file", readyPath, "--grace", testGrace.String()}, o.args...)
	var cmd *exec.Cmd
	if o.viaRun {
		cmd = exec.Command(cliBinary(t), append([]string{"run", "--root", root, "--label", "e2e-server", "--grace", testGrace.String(), "--", exe}, args...)...)
	} else {
		cmd = exec.Command(exe, args...)
	}
	cmd.Env = append(os.Environ(), envServerChild+"=1", envMarkerDir+"="+markers, "TMUX=", envCrashAt+"="+o.crashAt, envPauseAt+"="+o.pauseAt, noExitSleep())
	cmd.Env = append(cmd.Env, o.env...)
	cmd.Dir = "/"
	// Its own process group: a Ctrl-C meant for `go test` reaches the
	// test binary, whose cleanup then stops the server in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s := &srv{t: t, root: root, cmd: cmd, stderr: &testroot.Buffer{}, markers: markers, waited: make(chan struct{})}
	cmd.Stderr = s.stderr
	cmd.Stdout = s.stderr
	s.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)

	// Started inside an admission of the test binary and recorded there,
	// so that a signal to the test binary ends it. The first server of a
	// root takes over the root's record (see newRoot).
	adm := admit(t)
	rec := &journal.Record{Kind: journal.KindProcess, Label: "e2e-server under " + t.Name(), Phase: journal.PhaseIntent}
	if v, ok := rootRecords.LoadAndDelete(root); ok {
		rrec := *v.(*journal.Record)
		rec.ID, rec.Paths, rec.Label = rrec.ID, rrec.Paths, "e2e-server and its root under "+t.Name()
	}
	require.NoError(t, adm.Publish(rec))
	err = cmd.Start()
	if err == nil {
		var id owner.Identity
		if id, err = owner.Of(cmd.Process.Pid); err == nil {
			rec.Subject, rec.PGID, rec.Phase = &id, id.PID, journal.PhaseLive
			err = adm.Publish(rec)
		}
	}
	adm.Done()
	require.NoError(t, err)
	ownsRoot := len(rec.Paths) > 0
	go func() {
		cmd.Wait()
		s.state = cmd.ProcessState
		close(s.waited)
	}()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("server stderr:\n%s", s.stderr.String())
		}
		if !ownsRoot {
			// The root's record is retired by newRoot's cleanup.
			testguard.Root().Retire(rec.ID)
		}
		if s.proc != nil {
			s.proc.Close()
		}
	})
	s.client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if o.noReady {
		return s
	}
	b := testroot.WaitFileWithin(t, readyPath, cmd.Process.Pid, waitTimeout)
	require.NoError(t, json.Unmarshal(b, &s.ready))
	s.base = "http://" + s.ready.Addr
	id, err := owner.Of(s.ready.PID)
	require.NoError(t, err)
	require.Equal(t, s.ready.StartTime, id.StartTime)
	s.proc, err = owner.Open(id)
	require.NoError(t, err)
	return s
}

// stop ends the server if it still runs: SIGTERM, a bounded wait, SIGKILL.
func (s *srv) stop() {
	select {
	case <-s.waited:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.waited:
	case <-time.After(waitTimeout):
		s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.waited
	}
}

// signal sends sig to the server itself (not to `ownerjournal run`).
func (s *srv) signal(sig syscall.Signal) {
	s.t.Helper()
	require.NoError(s.t, s.proc.Signal(sig))
}

// exitCode waits for the started process (server or run) and returns its
// exit status.
func (s *srv) exitCode() int {
	s.t.Helper()
	select {
	case <-s.waited:
	case <-time.After(waitTimeout):
		require.FailNow(s.t, "server did not exit", "stderr:\n%s", s.stderr.String())
	}
	return s.state.ExitCode()
}

// awaitServerExit waits on the server's pidfd (it may be a grandchild).
func (s *srv) awaitServerExit() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(s.t, s.proc.Wait(ctx))
}

// marker waits for the server's marker file for stage.
func (s *srv) marker(stage string) {
	s.t.Helper()
	testroot.WaitFileWithin(s.t, filepath.Join(s.markers, stage), s.cmd.Process.Pid, waitTimeout)
}

// release releases a paused stage.
func (s *srv) release(stage string) {
	s.t.Helper()
	_, err := io.WriteString(s.stdin, stage+"\n")
	require.NoError(s.t, err)
}

// do sends one request and returns the status and body.
func (s *srv) do(method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, s.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// call is do that must get an answer.
func (s *srv) call(method, path string, body []byte) (int, []byte) {
	s.t.Helper()
	code, b, err := s.do(method, path, body)
	require.NoError(s.t, err)
	return code, b
}

// async sends a request that is expected to hang (the server crashes or
// pauses in it); the result arrives on the channel.
func (s *srv) async(method, path string, body []byte) <-chan result {
	ch := make(chan result, 1)
	go func() {
		code, b, err := s.do(method, path, body)
		ch <- result{code, b, err}
	}()
	return ch
}

type result struct {
	code int
	body []byte
	err  error
}

func awaitResult(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitTimeout):
		require.FailNow(t, "request did not finish")
		return result{}
	}
}

// create makes one session and checks that its tmux server answers.
func (s *srv) create() sessionInfo {
	s.t.Helper()
	code, b := s.call("POST", "/sessions", nil)
	require.Equal(s.t, http.StatusCreated, code, "%s", b)
	var si sessionInfo
	require.NoError(s.t, json.Unmarshal(b, &si))
	require.True(s.t, tmuxAnswers(s.t, si.Socket), "tmux on %s", si.Socket)
	return si
}

// tmuxAnswers reports whether a tmux server answers on socket (a private
// path: the default socket is never touched).
func tmuxAnswers(t *testing.T, socket string) bool {
	t.Helper()
	cmd := exec.Command("tmux", "-S", socket, "has-session")
	cmd.Env, cmd.Dir = []string{"PATH=" + fixedPath, "HOME=/"}, "/"
	return cmd.Run() == nil
}

// records lists the records in root.
func records(t *testing.T, root string) []*journal.Record {
	t.Helper()
	r, err := journal.Open(root)
	require.NoError(t, err)
	defer r.Close()
	sc, err := r.Scan()
	require.NoError(t, err)
	require.Empty(t, sc.Corrupt)
	return sc.Records
}

// waitGone waits until path no longer exists, on inotify events of its
// directory.
func waitGone(t *testing.T, path string) {
	t.Helper()
	ifd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	require.NoError(t, err)
	defer unix.Close(ifd)
	_, err = unix.InotifyAddWatch(ifd, filepath.Dir(path), unix.IN_DELETE|unix.IN_MOVED_FROM)
	require.NoError(t, err)
	deadline := time.Now().Add(waitTimeout)
	buf := make([]byte, 4096)
	for {
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			return
		}
		left := time.Until(deadline)
		require.Positive(t, left, "timed out waiting for %s to go", path)
		fds := []unix.PollFd{{Fd: int32(ifd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(left.Milliseconds())+1); err != nil && err != unix.EINTR {
			require.NoError(t, err)
		}
		for {
			if _, err := unix.Read(ifd, buf); err != nil {
				break
			}
		}
	}
}

// requireNothingLeft asserts that root and everything in it are gone: the
// directory (and any tombstone of it), and every process that references it.
// A process still found (a pane dying of its terminal's hangup) is awaited
// on a pidfd, bounded; it is never polled for.
func requireNothingLeft(t *testing.T, root string) {
	t.Helper()
	_, err := os.Lstat(root)
	require.ErrorIs(t, err, fs.ErrNotExist, "root %s must be removed", root)
	ents, err := os.ReadDir(filepath.Dir(root))
	if !errors.Is(err, fs.ErrNotExist) {
		require.NoError(t, err)
	}
	for _, e := range ents {
		assert.False(t, strings.HasPrefix(e.Name(), "."+filepath.Base(root)), "tombstone %s left", e.Name())
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for _, id := range testroot.ProcsReferencing(t, root, owner.Of) {
		p, err := owner.Open(id)
		if err != nil {
			continue
		}
		assert.NoError(t, p.Wait(ctx), "process %v referencing %s must exit", id, root)
		p.Close()
	}
	assert.Empty(t, testroot.ProcsReferencing(t, root, owner.Of), "processes referencing %s", root)
}

// bystanders stand in for what is not ours: a tmux server on another
// private socket (the developer's own; never the default socket) and an
// unrelated process. They are recorded in the test binary's root, so a
// signal to the test binary still ends them.
type bystanders struct {
	socket string
	tmux   *owner.Process
	sleep  *exec.Cmd
	sleepP *owner.Process
}

func startBystanders(t *testing.T) *bystanders {
	t.Helper()
	bin := requireTmux(t)
	g := testguard.Root()
	b := &bystanders{}
	name := "b-" + hex4()
	b.socket = filepath.Join(g.Path(), name)
	adm := admit(t)
	defer adm.Done()
	trec := &journal.Record{Kind: journal.KindTmux, Label: "bystander tmux", Sockets: []string{name}, Phase: journal.PhaseIntent}
	require.NoError(t, adm.Publish(trec))
	t.Cleanup(func() {
		killServer(context.Background(), bin, b.socket)
		if b.tmux != nil {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			recover.Terminate(ctx, b.tmux, true, testGrace)
			cancel()
			b.tmux.Close()
		}
		g.Dir().Remove(name)
		g.Retire(trec.ID)
	})
	ctx := context.Background()
	require.NoError(t, newSession(ctx, bin, b.socket, "sleep 100000"))
	pid, _, err := serverPIDs(ctx, bin, b.socket)
	require.NoError(t, err)
	id, err := owner.Of(pid)
	require.NoError(t, err)
	b.tmux, err = owner.Open(id)
	require.NoError(t, err)
	trec.Subject, trec.PGID, trec.Phase = &id, pid, journal.PhaseLive
	require.NoError(t, adm.Publish(trec))

	srec := &journal.Record{Kind: journal.KindProcess, Label: "bystander process", Phase: journal.PhaseIntent}
	require.NoError(t, adm.Publish(srec))
	b.sleep = exec.Command("sleep", "100000")
	b.sleep.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, b.sleep.Start())
	t.Cleanup(func() {
		b.sleep.Process.Kill()
		b.sleep.Wait()
		g.Retire(srec.ID)
	})
	sid, err := owner.Of(b.sleep.Process.Pid)
	require.NoError(t, err)
	b.sleepP, err = owner.Open(sid)
	require.NoError(t, err)
	t.Cleanup(func() { b.sleepP.Close() })
	srec.Subject, srec.PGID, srec.Phase = &sid, sid.PID, journal.PhaseLive
	require.NoError(t, adm.Publish(srec))
	return b
}

// check asserts that both bystanders are untouched.
func (b *bystanders) check(t *testing.T) {
	t.Helper()
	assert.False(t, b.tmux.Exited(), "the bystander tmux server must survive")
	assert.True(t, tmuxAnswers(t, b.socket), "the bystander tmux server must still answer")
	assert.False(t, b.sleepP.Exited(), "the unrelated process must survive")
}

// recoverHow selects how a test replays a root after a crash.
type recoverHow string

const (
	libOrphans recoverHow = "library, orphans only"
	libAll     recoverHow = "library, --all"
	cliAll     recoverHow = "CLI, recover --all --json"
)

// recoverRoot replays root and requires a clean report with the root
// removed.
func recoverRoot(t *testing.T, root string, how recoverHow) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if how == cliAll {
		cmd := exec.CommandContext(ctx, cliBinary(t), "recover", "--root", root, "--all", "--grace", testGrace.String(), "--json")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		require.NoError(t, err, "ownerjournal recover: %s\n%s", stderr.String(), stdout.String())
		var rep recover.Report
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep), "%s", stdout.String())
		require.Zero(t, rep.Retained, "%s", stdout.String())
		require.True(t, rep.RootRemoved, "%s", stdout.String())
		return
	}
	r, err := journal.Open(root)
	require.NoError(t, err)
	defer r.Close()
	rep, err := recover.Run(ctx, r, recover.Options{All: how == libAll, Grace: testGrace})
	require.NoError(t, err)
	b, _ := json.MarshalIndent(rep, "", "  ")
	require.True(t, rep.Clean(), "%s", b)
	require.True(t, rep.RootRemoved, "%s", b)
}
