package testroot

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// UserName is the second, unprivileged user the tests create and use.
const UserName = "ojtest"

// Timeout bounds every wait in the helpers. It is a safety net that turns a
// hang into a failure; nothing waits for it to pass.
const Timeout = 30 * time.Second

const (
	envChild = "OJ_TEST_CHILD"
	envReady = "OJ_TEST_READY_DIR"
)

// Dir returns a new private directory (mode 0700) with a short path under
// os.TempDir(), removed when the test ends. t.TempDir() paths are too long
// for a root that must hold Unix socket paths.
func Dir(t testing.TB) string {
	t.Helper()
	return PrivateDir(t, "oj")
}

// PrivateDir is [Dir] with the name prefix of the directory.
func PrivateDir(t testing.TB, prefix string) string {
	t.Helper()
	d, err := os.MkdirTemp("", prefix)
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	require.NoError(t, os.Chmod(d, 0o700))
	return d
}

// SecondUser returns the UID and GID of the user [UserName], creating it
// with useradd(8) if it does not exist. The tests run as root.
func SecondUser(t testing.TB) (uid, gid int) {
	t.Helper()
	u, err := user.Lookup(UserName)
	if err != nil {
		// Test binaries of several packages run at once: serialise the
		// creation (useradd fails while another holds /etc/passwd's lock).
		lf, err := os.OpenFile(filepath.Join(os.TempDir(), ".ownerjournal-useradd.lock"), os.O_CREATE|os.O_RDWR, 0o600)
		require.NoError(t, err)
		defer lf.Close()
		require.NoError(t, unix.Flock(int(lf.Fd()), unix.LOCK_EX))
		if u, err = user.Lookup(UserName); err != nil {
			out, err := exec.Command("useradd", "-M", "-s", "/usr/sbin/nologin", UserName).CombinedOutput()
			require.NoError(t, err, "useradd %s: %s", UserName, out)
			u, err = user.Lookup(UserName)
			require.NoError(t, err)
		}
	}
	uid, err = strconv.Atoi(u.Uid)
	require.NoError(t, err)
	gid, err = strconv.Atoi(u.Gid)
	require.NoError(t, err)
	require.NotZero(t, uid, "%s must not be root", UserName)
	return uid, gid
}

// Main is TestMain for a package with child processes: in a process started
// by [Start] it runs the named child and exits with its status; otherwise it
// runs the tests.
func Main(m *testing.M, children map[string]func() int) {
	if name := os.Getenv(envChild); name != "" {
		f, ok := children[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "testroot: unknown child %q\n", name)
			os.Exit(2)
		}
		os.Exit(f())
	}
	code := m.Run()
	RemoveCopy()
	os.Exit(code)
}

// RemoveCopy removes the copy of the test binary that children of another
// user run (see [Options.Credential]). [Main] calls it after the tests; a
// TestMain that does not use Main calls it itself.
func RemoveCopy() {
	copyMu.Lock()
	defer copyMu.Unlock()
	if copied != "" {
		os.RemoveAll(filepath.Dir(copied))
		copied = ""
	}
}

// Ready publishes the readiness file name with data, atomically (a
// complete file appears under its name or nothing does). It is called by
// a child process.
func Ready(name string, data []byte) error {
	dir := os.Getenv(envReady)
	if dir == "" {
		return errors.New("testroot: not a child process")
	}
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

// Child is a re-executed test binary running one child function.
type Child struct {
	t        testing.TB
	Cmd      *exec.Cmd
	stdin    io.WriteCloser
	stderr   *Buffer
	readyDir string
	waitOnce sync.Once
	waitErr  error
}

// Options adjust [StartOpts].
type Options struct {
	// Env is added to the child's environment.
	Env []string
	// Credential, when set, runs the child as another user; the test
	// binary is copied to a directory that user can read.
	Credential *syscall.Credential
	// Wrap, when set, is a command that runs the child as its last
	// argument: ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "--"]
	// starts it in a new PID namespace (see [Unshare]).
	Wrap []string
	// ExtraFiles are passed to the child as fds 3, 4, ... (a directory a
	// child of another user could not reach by path).
	ExtraFiles []*os.File
}

// Start re-executes the test binary as the child name (see [Main]), with
// extra environment variables env ("K=V"). The child is SIGKILLed and
// reaped at cleanup if it is still running.
func Start(t testing.TB, name string, env ...string) *Child {
	t.Helper()
	return StartOpts(t, name, Options{Env: env})
}

// StartOpts is [Start] with options.
func StartOpts(t testing.TB, name string, o Options) *Child {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	readyDir := Dir(t)
	if o.Credential != nil {
		exe = copyExecutable(t, exe)
		require.NoError(t, os.Chown(readyDir, int(o.Credential.Uid), int(o.Credential.Gid)))
	}
	cmd := exec.Command(exe, "-test.run=^$")
	if len(o.Wrap) > 0 {
		cmd = exec.Command(o.Wrap[0], append(o.Wrap[1:], exe, "-test.run=^$")...)
	}
	cmd.Env = append(os.Environ(), envChild+"="+name, envReady+"="+readyDir)
	cmd.Env = append(cmd.Env, o.Env...)
	cmd.Dir = "/"
	cmd.ExtraFiles = o.ExtraFiles
	if o.Credential != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: o.Credential}
	}
	c := &Child{t: t, Cmd: cmd, stderr: &Buffer{}, readyDir: readyDir}
	cmd.Stderr = c.stderr
	c.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		c.Kill()
		if t.Failed() && c.stderr.Len() > 0 {
			t.Logf("child %s (pid %d) stderr:\n%s", name, cmd.Process.Pid, c.stderr.String())
		}
	})
	return c
}

// Executable returns a copy of the test binary that every user can read
// and execute (the go-build directory is 0700), for a child run as another
// user; [Main] removes it after the tests.
func Executable(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	return copyExecutable(t, exe)
}

var (
	copyMu sync.Mutex
	copied string // the test binary's copy, removed by Main
)

// copyExecutable copies the test binary (its go-build directory is 0700) to
// a directory any user can read and execute, once per test binary; [Main]
// removes it after the tests.
func copyExecutable(t testing.TB, exe string) string {
	t.Helper()
	copyMu.Lock()
	defer copyMu.Unlock()
	if copied != "" {
		return copied
	}
	dir, err := os.MkdirTemp("", "ojbin")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	src, err := os.Open(exe)
	require.NoError(t, err)
	defer src.Close()
	dst := filepath.Join(dir, filepath.Base(exe))
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(out, src)
	require.NoError(t, errors.Join(err, out.Close()))
	copied = dst
	return dst
}

// Unshare returns the command prefix that starts a child in a new PID
// namespace with a procfs of its own (util-linux unshare(1); the Makefile's
// prereqs install it). A missing unshare fails the test: it is a
// prerequisite, never a reason to skip.
func Unshare(t testing.TB) []string {
	t.Helper()
	p, err := exec.LookPath("unshare")
	require.NoError(t, err, "unshare(1) from util-linux is required (make prereqs installs it)")
	return []string{p, "--pid", "--fork", "--mount-proc", "--kill-child", "--"}
}

// PID is the child's process id.
func (c *Child) PID() int { return c.Cmd.Process.Pid }

// Send writes one line to the child's stdin.
func (c *Child) Send(line string) {
	c.t.Helper()
	_, err := io.WriteString(c.stdin, line+"\n")
	require.NoError(c.t, err)
}

// CloseStdin closes the child's stdin; children treat EOF as "finish".
func (c *Child) CloseStdin() { c.stdin.Close() }

// WaitReady waits for the child's readiness file name and returns its
// contents. It fails the test if the child exits first or after [Timeout].
func (c *Child) WaitReady(name string) []byte {
	c.t.Helper()
	return WaitFile(c.t, filepath.Join(c.readyDir, name), c.PID())
}

// Wait waits for the child to exit and reaps it; it returns the exit error
// of exec.Cmd.Wait. It is idempotent.
func (c *Child) Wait() error {
	c.waitOnce.Do(func() { c.waitErr = c.Cmd.Wait() })
	return c.waitErr
}

// Kill SIGKILLs the child unless it was reaped already, and reaps it.
func (c *Child) Kill() {
	reaped := c.Cmd.ProcessState != nil
	if !reaped {
		c.Cmd.Process.Signal(syscall.SIGKILL)
	}
	c.stdin.Close()
	c.Wait()
}

// Stderr returns what the child wrote to stderr so far.
func (c *Child) Stderr() string { return c.stderr.String() }

// WaitFile waits until path exists and returns its contents. The file must
// be published atomically (written elsewhere, then renamed). The wait is on
// inotify events of the file's directory and on a pidfd of process pid: it
// fails the test as soon as pid exits without having created the file, or
// after [Timeout]. pid must be a child of the caller that has not been
// reaped (so that its PID cannot be reused meanwhile).
func WaitFile(t testing.TB, path string, pid int) []byte {
	t.Helper()
	return WaitFileWithin(t, path, pid, Timeout)
}

// WaitFileWithin is [WaitFile] with the safety-net timeout limit instead of
// [Timeout].
func WaitFileWithin(t testing.TB, path string, pid int, limit time.Duration) []byte {
	t.Helper()
	pfd, err := unix.PidfdOpen(pid, 0)
	require.NoError(t, err, "pidfd_open %d", pid)
	defer unix.Close(pfd)
	return WaitFilePidfd(t, path, pfd, limit)
}

// WaitFilePidfd is [WaitFileWithin] for a process given by its pidfd (owned
// by the caller, left open).
func WaitFilePidfd(t testing.TB, path string, pidfd int, limit time.Duration) []byte {
	t.Helper()
	ifd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	require.NoError(t, err)
	defer unix.Close(ifd)
	_, err = unix.InotifyAddWatch(ifd, filepath.Dir(path), unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE|unix.IN_CREATE)
	require.NoError(t, err)
	deadline := time.Now().Add(limit)
	buf := make([]byte, 64<<10)
	for exited := false; ; {
		if b, err := os.ReadFile(path); err == nil {
			return b
		}
		if exited {
			require.FailNow(t, "process exited before it was ready", "pidfd %d, waiting for %s", pidfd, path)
		}
		left := time.Until(deadline)
		if left <= 0 {
			require.FailNow(t, "timeout", "waited %v for %s", limit, path)
		}
		fds := []unix.PollFd{{Fd: int32(ifd), Events: unix.POLLIN}, {Fd: int32(pidfd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(left.Milliseconds())+1); err != nil && !errors.Is(err, unix.EINTR) {
			require.NoError(t, err)
		}
		for {
			if _, err := unix.Read(ifd, buf); err != nil {
				break
			}
		}
		exited = fds[1].Revents&unix.POLLIN != 0
	}
}

// ProcsReferencing lists the processes, other than the caller, whose
// command line or environment contains s (a tmux server keeps its -S
// argument, a pane has TMUX=<socket> in its environment), each mapped
// through of (owner.Of, typically); a process of fails on (gone meanwhile,
// a zombie) is left out.
func ProcsReferencing[T any](t testing.TB, s string, of func(pid int) (T, error)) []T {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []T
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		hit := false
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
			if err == nil && bytes.Contains(b, []byte(s)) {
				hit = true
			}
		}
		if !hit {
			continue
		}
		if v, err := of(pid); err == nil {
			out = append(out, v)
		}
	}
	return out
}

// Buffer is a bytes.Buffer safe for the exec.Cmd copier goroutines and the
// test goroutine at once.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Bytes returns a copy of what was written so far.
func (s *Buffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// Len returns how many bytes were written so far.
func (s *Buffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// Lines returns a scanner over the child side's stdin, for children that
// take commands line by line.
func Lines() *bufio.Scanner { return bufio.NewScanner(os.Stdin) }
