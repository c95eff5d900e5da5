package reliability

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/owner"
)

// timeout bounds every wait of the harness: a safety net that turns a hang
// into a failure; nothing waits for it to pass.
const timeout = 60 * time.Second

// tagVar is the environment variable every process of one scenario run
// inherits (tmux servers and daemonized descendants included): a process
// whose /proc/PID/environ holds the run's tag after recovery is a leak,
// wherever it re-parented to.
const tagVar = "OJ_REL_TAG"

// env is the suite's shared state: the built binaries, the bystanders and
// the registry of the processes this test process started.
type env struct {
	modRoot string
	binDir  string // 0755: ownerjournal (and e2e-server), runnable by other users
	cli     string
	e2e     string // e2e-server binary, "" when cmd/e2e-server does not exist
	tmux    string

	// startMu is read-held while a child is started and registered, and
	// write-held by reapOrphans, so that only processes this process did not
	// start itself are reaped there.
	startMu sync.RWMutex
	mu      sync.Mutex
	mine    map[int]bool

	bys bystanders
}

// bystanders stand for what recovery must never touch: a developer's tmux
// server (on a private socket, never the machine's default one), an
// unrelated process that records every signal it gets, and a file outside
// every root.
type bystanders struct {
	dir      string
	devSock  string
	devTmux  owner.Identity
	counter  *proc
	sigFile  string
	outside  string
	outsideM time.Time
}

const outsideContent = "bystander: must survive\n"

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{mine: map[int]bool{}}
	var err error
	e.tmux, err = exec.LookPath("tmux")
	require.NoError(t, err, "tmux is a prerequisite of the reliability suite: install it (make prereqs)")
	e.modRoot = moduleRoot(t)
	e.binDir, err = os.MkdirTemp("", "ojrbin")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(e.binDir) })
	require.NoError(t, os.Chmod(e.binDir, 0o755))
	e.cli = filepath.Join(e.binDir, "ownerjournal")
	e.build(t, "./cmd/ownerjournal", e.cli)
	if _, err := os.Stat(filepath.Join(e.modRoot, "cmd", "e2e-server")); err == nil {
		e.e2e = filepath.Join(e.binDir, "e2e-server")
		e.build(t, "./cmd/e2e-server", e.e2e)
	}
	e.startBystanders(t)
	t.Cleanup(func() { e.reapOrphans() })
	return e
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	d, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		require.NotEqual(t, parent, d, "go.mod not found above the working directory")
		d = parent
	}
}

func (e *env) build(t *testing.T, pkg, out string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = e.modRoot
	b, err := e.output(cmd)
	require.NoError(t, err, "go build %s: %s", pkg, b)
	require.NoError(t, os.Chmod(out, 0o755))
}

// proc is a process this test process started; it is reaped by a goroutine
// of its own as soon as it exits.
type proc struct {
	cmd    *exec.Cmd
	pidfd  int
	done   chan struct{}
	err    error
	stderr *os.File // an unlinked file: no pipe that a descendant could hold open
	stdin  io.WriteCloser
	stdout io.Reader
	ready  string // readiness directory of a re-executed child
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// stderrText returns what the process wrote to its stderr so far.
func (p *proc) stderrText() string {
	if p.stderr == nil {
		return ""
	}
	fi, err := p.stderr.Stat()
	if err != nil {
		return ""
	}
	b := make([]byte, fi.Size())
	n, _ := p.stderr.ReadAt(b, 0)
	return string(b[:n])
}

// exited reports whether the process has exited (it may not be reaped yet).
func (p *proc) exited() bool {
	fds := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
	n, _ := unix.Poll(fds, 0)
	return n > 0
}

// wait waits for the process to be reaped, up to d; only the timeout is an
// error (the exit status is exitCode's).
func (p *proc) wait(d time.Duration) error {
	select {
	case <-p.done:
		return nil
	case <-time.After(d):
		return fmt.Errorf("pid %d still running after %v", p.pid(), d)
	}
}

// exitCode is the exit status after wait: 128+n for a signal.
func (p *proc) exitCode() int {
	ps := p.cmd.ProcessState
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// kill SIGKILLs the process through its pidfd (never a bare PID) and waits
// for it.
func (p *proc) kill() {
	unix.PidfdSendSignal(p.pidfd, unix.SIGKILL, nil, 0)
	p.wait(timeout)
}

// signal sends sig through the pidfd.
func (p *proc) signal(sig syscall.Signal) error {
	return unix.PidfdSendSignal(p.pidfd, sig, nil, 0)
}

// spawn starts cmd, registers it and reaps it when it exits. The process is
// killed at cleanup if it still runs.
func (e *env) spawn(t testing.TB, cmd *exec.Cmd) *proc {
	t.Helper()
	p, err := e.spawnErr(cmd)
	require.NoError(t, err, "start %v", cmd.Args)
	t.Cleanup(func() {
		p.kill()
		unix.Close(p.pidfd)
		if p.stderr != nil {
			if t.Failed() {
				if s := p.stderrText(); s != "" {
					t.Logf("pid %d %v stderr:\n%s", p.pid(), cmd.Args, s)
				}
			}
			p.stderr.Close()
		}
	})
	return p
}

func (e *env) spawnErr(cmd *exec.Cmd) (*proc, error) {
	p := &proc{cmd: cmd, done: make(chan struct{}), pidfd: -1}
	if cmd.Stderr == nil {
		f, err := os.CreateTemp("", "ojrerr")
		if err != nil {
			return nil, err
		}
		os.Remove(f.Name())
		p.stderr = f
		cmd.Stderr = f
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.PidFD = &p.pidfd
	e.startMu.RLock()
	err := cmd.Start()
	if err == nil {
		e.mu.Lock()
		e.mine[cmd.Process.Pid] = true
		e.mu.Unlock()
	}
	e.startMu.RUnlock()
	if err != nil {
		return nil, err
	}
	go func() {
		p.err = cmd.Wait()
		e.mu.Lock()
		delete(e.mine, cmd.Process.Pid)
		e.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// run runs cmd to completion (bounded by the harness timeout) and returns
// its combined output and exit code.
func (e *env) run(cmd *exec.Cmd) (string, int, error) { return e.runFor(cmd, timeout) }

// runFor is run bounded by d.
func (e *env) runFor(cmd *exec.Cmd, d time.Duration) (string, int, error) {
	var out testroot.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	p, err := e.spawnErr(cmd)
	if err != nil {
		return "", -1, err
	}
	defer unix.Close(p.pidfd)
	if err := p.wait(d); err != nil {
		p.kill()
		return out.String(), -1, err
	}
	return out.String(), p.exitCode(), nil
}

// output runs cmd and returns its combined output, and an error unless it
// exited 0.
func (e *env) output(cmd *exec.Cmd) (string, error) {
	out, code, err := e.run(cmd)
	if err == nil && code != 0 {
		err = fmt.Errorf("%v: exit %d", cmd.Args, code)
	}
	return out, err
}

// childOpts adjust a re-executed child.
type childOpts struct {
	env    []string
	pgid   bool // own process group
	stdin  bool // a pipe; EOF tells the child to finish
	stdout bool // a pipe, read through proc.stdout
	cred   *syscall.Credential
}

// child re-executes the test binary as the child name (see TestMain).
func (e *env) child(t testing.TB, name string, o childOpts) *proc {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	ready, err := os.MkdirTemp("", "ojrdy")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(ready) })
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "OJ_TEST_CHILD="+name, "OJ_TEST_READY_DIR="+ready)
	cmd.Env = append(cmd.Env, o.env...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: o.pgid, Credential: o.cred}
	var stdin io.WriteCloser
	if o.stdin {
		stdin, err = cmd.StdinPipe()
		require.NoError(t, err)
	}
	var stdout io.Reader
	if o.stdout {
		stdout, err = cmd.StdoutPipe()
		require.NoError(t, err)
	}
	p := e.spawn(t, cmd)
	p.stdin, p.stdout, p.ready = stdin, stdout, ready
	if stdin != nil {
		t.Cleanup(func() { stdin.Close() })
	}
	return p
}

// waitReady waits for the child's readiness file name and returns it.
func (p *proc) waitReady(t testing.TB, name string) []byte {
	t.Helper()
	path := filepath.Join(p.ready, name)
	var b []byte
	waitUntil(t, []string{p.ready}, p, func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil
	}, "readiness file "+name)
	return b
}

// waitUntil waits until cond holds, re-evaluating it on every inotify event
// of dirs (creations, renames, writes, deletions). It fails as soon as p (if
// not nil) exits with cond still false, or after the timeout.
func waitUntil(t testing.TB, dirs []string, p *proc, cond func() bool, what string) {
	t.Helper()
	ifd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	require.NoError(t, err)
	defer unix.Close(ifd)
	for _, d := range dirs {
		_, err := unix.InotifyAddWatch(ifd, d, unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE|unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_ATTRIB|unix.IN_MODIFY)
		require.NoError(t, err, "inotify %s", d)
	}
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 64<<10)
	for exited := false; ; {
		if cond() {
			return
		}
		if exited {
			msg := p.stderrText()
			require.FailNow(t, "process exited first", "waiting for %s; pid %d stderr:\n%s", what, p.pid(), msg)
		}
		left := time.Until(deadline)
		if left <= 0 {
			require.FailNow(t, "timeout", "waited %v for %s", timeout, what)
		}
		fds := []unix.PollFd{{Fd: int32(ifd), Events: unix.POLLIN}}
		if p != nil {
			fds = append(fds, unix.PollFd{Fd: int32(p.pidfd), Events: unix.POLLIN})
		}
		if _, err := unix.Poll(fds, int(left.Milliseconds())+1); err != nil && err != unix.EINTR {
			require.NoError(t, err)
		}
		for {
			if _, err := unix.Read(ifd, buf); err != nil {
				break
			}
		}
		exited = p != nil && fds[1].Revents&unix.POLLIN != 0
	}
}

// reapOrphans reaps zombies that re-parented to this process (it is a child
// subreaper) and that it did not start itself.
func (e *env) reapOrphans() {
	e.startMu.Lock()
	defer e.startMu.Unlock()
	self := os.Getpid()
	for _, pid := range allPIDs() {
		st, err := readStat(pid)
		if err != nil || st.ppid != self || st.state != 'Z' {
			continue
		}
		e.mu.Lock()
		mine := e.mine[pid]
		e.mu.Unlock()
		if mine {
			continue
		}
		var ws unix.WaitStatus
		for {
			if _, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err != unix.EINTR {
				break
			}
		}
	}
}

func allPIDs() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var pids []int
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

type statInfo struct {
	state byte
	ppid  int
}

func readStat(pid int) (statInfo, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return statInfo{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return statInfo{}, errors.New("bad stat")
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 2 {
		return statInfo{}, errors.New("bad stat")
	}
	ppid, _ := strconv.Atoi(f[1])
	return statInfo{state: f[0][0], ppid: ppid}, nil
}

// leakedProcs lists the live (non-zombie) processes of a run: those whose
// environment holds tagVar=tag, those holding a Unix socket bound under dir
// (a tmux server started with a scrubbed environment, whose process title
// hides its command line), and their descendants.
func leakedProcs(tag, dir string) []int {
	want := []byte(tagVar + "=" + tag)
	inodes := unixSocketsUnder(dir)
	hit := map[int]bool{}
	children := map[int][]int{}
	live := map[int]bool{}
	for _, pid := range allPIDs() {
		st, err := readStat(pid)
		if err != nil || st.state == 'Z' || st.state == 'X' {
			continue
		}
		live[pid] = true
		children[st.ppid] = append(children[st.ppid], pid)
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ"); err == nil {
			for _, kv := range bytes.Split(b, []byte{0}) {
				if bytes.Equal(kv, want) {
					hit[pid] = true
					break
				}
			}
		}
		if !hit[pid] && len(inodes) > 0 && holdsSocket(pid, inodes) {
			hit[pid] = true
		}
	}
	var out []int
	var walk func(int)
	seen := map[int]bool{}
	walk = func(pid int) {
		if seen[pid] {
			return
		}
		seen[pid] = true
		if live[pid] {
			out = append(out, pid)
		}
		for _, c := range children[pid] {
			walk(c)
		}
	}
	delete(hit, os.Getpid()) // the test's own listeners
	for pid := range hit {
		walk(pid)
	}
	return out
}

// unixSocketsUnder returns the inodes of the Unix sockets bound to a path
// under dir (/proc/net/unix; an unlinked path still shows).
func unixSocketsUnder(dir string) map[string]bool {
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return nil
	}
	m := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) >= 8 && strings.HasPrefix(f[7], dir+"/") {
			m[f[6]] = true
		}
	}
	return m
}

func holdsSocket(pid int, inodes map[string]bool) bool {
	fdDir := "/proc/" + strconv.Itoa(pid) + "/fd"
	d, err := os.Open(fdDir)
	if err != nil {
		return false
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, n := range names {
		l, err := os.Readlink(fdDir + "/" + n)
		if err != nil || !strings.HasPrefix(l, "socket:[") {
			continue
		}
		if inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] {
			return true
		}
	}
	return false
}

// settled drops from pids the processes that exit within a short bound:
// a process already hit by a fatal signal (a tmux pane getting SIGHUP as
// its server exits) is dying, not leaked, though a loaded machine may not
// have run its exit yet. The wait is on pidfds; a leaked process does not
// exit and is kept.
func settled(pids []int) []int {
	deadline := time.Now().Add(2 * time.Second)
	var out []int
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone already
		}
		left := time.Until(deadline)
		if left < 0 {
			left = 0
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, _ := unix.Poll(fds, int(left.Milliseconds()))
		unix.Close(fd)
		if n == 0 {
			out = append(out, pid)
		}
	}
	return out
}

// killLeaked ends every leaked process of a run through verified handles
// and reaps what re-parented here.
func (e *env) killLeaked(pids []int) {
	for _, pid := range pids {
		id, err := owner.Of(pid)
		if err != nil {
			continue
		}
		p, err := owner.Open(id)
		if err != nil {
			continue
		}
		p.Signal(syscall.SIGKILL)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		p.Wait(ctx)
		cancel()
		p.Close()
	}
	e.reapOrphans()
}

// leftovers counts what is left under dir after a run: sockets anywhere,
// and directories: the root (name root) if it still exists and recovery
// tombstones (".root.removing-*").
func leftovers(dir, root string) (sockets, dirs int, what []string) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type()&fs.ModeSocket != 0 {
			sockets++
			what = append(what, "socket "+p)
		}
		return nil
	})
	if fi, err := os.Lstat(root); err == nil && fi.IsDir() {
		dirs++
		what = append(what, "directory "+root)
	}
	ents, _ := os.ReadDir(filepath.Dir(root))
	for _, en := range ents {
		if strings.HasPrefix(en.Name(), "."+filepath.Base(root)+".removing-") {
			dirs++
			what = append(what, "tombstone "+en.Name())
		}
	}
	return sockets, dirs, what
}

// runDir is a short private directory for one scenario run: the root is
// DIR/r, markers and fixtures live next to it.
func runDir(t testing.TB) (dir, root string) {
	t.Helper()
	d := testroot.PrivateDir(t, "ojr")
	root = filepath.Join(d, "r")
	require.NoError(t, os.Mkdir(root, 0o700))
	return d, root
}

// startBystanders starts the developer's tmux server and the signal
// counter, and writes the outside file.
func (e *env) startBystanders(t *testing.T) {
	t.Helper()
	b := &e.bys
	var err error
	b.dir, err = os.MkdirTemp("", "ojrbys")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(b.dir, 0o700))
	b.devSock = filepath.Join(b.dir, "dev.sock")
	b.sigFile = filepath.Join(b.dir, "signals")
	b.outside = filepath.Join(b.dir, "outside.txt")
	require.NoError(t, os.WriteFile(b.outside, []byte(outsideContent), 0o644))
	fi, err := os.Stat(b.outside)
	require.NoError(t, err)
	b.outsideM = fi.ModTime()
	out, err := e.output(e.tmuxCmd(b.devSock, "new-session", "-d", "-s", "dev", "sleep 100000"))
	require.NoError(t, err, "developer tmux server: %s", out)
	t.Cleanup(func() {
		e.output(e.tmuxCmd(b.devSock, "kill-server"))
		os.RemoveAll(b.dir)
		e.reapOrphans()
	})
	b.devTmux = tmuxServer(t, e, b.devSock)
	b.counter = e.child(t, "sigcounter", childOpts{env: []string{"OJ_REL_SIGFILE=" + b.sigFile}, pgid: true, stdin: true})
	b.counter.waitReady(t, "ready")
}

// tmuxCmd is a tmux client on a private socket with no configuration.
func (e *env) tmuxCmd(sock string, args ...string) *exec.Cmd {
	cmd := exec.Command(e.tmux, append([]string{"-S", sock, "-f", "/dev/null"}, args...)...)
	cmd.Env = withoutTMUX(os.Environ())
	return cmd
}

func withoutTMUX(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "TMUX=") && !strings.HasPrefix(kv, "TMUX_PANE=") {
			out = append(out, kv)
		}
	}
	return out
}

// tmuxServer returns the identity of the tmux server behind sock.
func tmuxServer(t testing.TB, e *env, sock string) owner.Identity {
	t.Helper()
	out, err := e.output(e.tmuxCmd(sock, "display-message", "-p", "#{pid}"))
	require.NoError(t, err, "%s", out)
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	require.NoError(t, err, "tmux pid %q", out)
	id, err := owner.Of(pid)
	require.NoError(t, err)
	return id
}

// checkBystanders returns how many bystanders were touched (and logs each).
func (e *env) checkBystanders(t testing.TB, when string) int {
	t.Helper()
	b := &e.bys
	var touched []string
	if v := owner.Check(b.devTmux); v.State != owner.Alive {
		touched = append(touched, "developer tmux server: "+v.Reason)
	} else if fi, err := os.Lstat(b.devSock); err != nil || fi.Mode()&fs.ModeSocket == 0 {
		touched = append(touched, fmt.Sprintf("developer tmux socket %s: %v", b.devSock, err))
	} else if out, err := e.output(e.tmuxCmd(b.devSock, "has-session", "-t", "dev")); err != nil {
		touched = append(touched, "developer tmux session: "+out)
	}
	if b.counter.exited() {
		touched = append(touched, "unrelated process exited")
	} else if st, err := readStat(b.counter.pid()); err == nil && (st.state == 'T' || st.state == 't') {
		touched = append(touched, "unrelated process stopped")
	}
	if sigs, _ := os.ReadFile(b.sigFile); len(sigs) > 0 {
		touched = append(touched, "unrelated process got signals: "+strings.TrimSpace(string(sigs)))
		os.Truncate(b.sigFile, 0)
	}
	if c, err := os.ReadFile(b.outside); err != nil || string(c) != outsideContent {
		touched = append(touched, fmt.Sprintf("outside file changed (%v)", err))
	} else if fi, err := os.Stat(b.outside); err != nil || !fi.ModTime().Equal(b.outsideM) || fi.Mode().Perm() != 0o644 {
		touched = append(touched, "outside file modified")
	}
	for _, s := range touched {
		t.Errorf("%s: bystander touched: %s", when, s)
	}
	return len(touched)
}

// deadIdentity returns the identity of a process that has exited and been
// reaped: an owner verified dead.
func (e *env) deadIdentity(t testing.TB) owner.Identity {
	t.Helper()
	cmd := exec.Command("sleep", "1000")
	p := e.spawn(t, cmd)
	id, err := owner.Of(p.pid())
	require.NoError(t, err)
	p.kill()
	return id
}

// lineReader reads one line from r (a child's "ok" on its stdout).
func readLine(r io.Reader) (string, error) {
	s, err := bufio.NewReader(r).ReadString('\n')
	return strings.TrimSpace(s), err
}

// snapshot records every entry under dir (path → mode, size, mtime, content
// hash of regular files), to prove that nothing outside a root was touched.
func snapshot(dir string) map[string]string {
	m := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			m[p] = "error " + err.Error()
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		v := fmt.Sprintf("%v %d %d uid=%d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano(), st.Uid)
		if fi.Mode().IsRegular() {
			if b, err := os.ReadFile(p); err == nil {
				v += " " + strconv.Quote(string(b))
			}
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			tgt, _ := os.Readlink(p)
			v += " -> " + tgt
		}
		m[p] = v
		return nil
	})
	return m
}
