package testguard

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
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

	"github.com/ownerjournal/ownerjournal/owner"
)

// waitTimeout is a safety net that turns a hang into a failure; no test
// waits for it to pass.
const waitTimeout = 60 * time.Second

const (
	envChild   = "OJ_TG_CHILD"
	envRoot    = "OJ_TG_ROOT"
	envMarkers = "OJ_TG_MARKERS"
)

// shortDir returns a new private directory with a short path (a root must
// hold Unix socket paths), removed at the end of the test.
func shortDir(t *testing.T, prefix string) string {
	t.Helper()
	d, err := os.MkdirTemp("", prefix)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(d, 0o700))
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// child is a re-executed test binary running one scenario.
type child struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stderr  *syncBuffer
	markers string
	waited  chan struct{}
	state   *os.ProcessState
}

func startChild(t *testing.T, name, root string) *child {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	markers := t.TempDir()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+name, envRoot+"="+root, envMarkers+"="+markers, noExitSleep())
	cmd.Dir = "/"
	c := &child{cmd: cmd, stderr: &syncBuffer{}, markers: markers, waited: make(chan struct{})}
	cmd.Stderr = c.stderr
	c.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	go func() {
		cmd.Wait()
		c.state = cmd.ProcessState
		close(c.waited)
	}()
	t.Cleanup(func() {
		select {
		case <-c.waited:
		default:
			cmd.Process.Signal(syscall.SIGKILL)
			<-c.waited
		}
		if t.Failed() {
			t.Logf("child %s stderr:\n%s", name, c.stderr.String())
		}
	})
	return c
}

// marker waits for the child's marker file name and returns its content.
func (c *child) marker(t *testing.T, name string) string {
	t.Helper()
	return string(waitFile(t, filepath.Join(c.markers, name), c.cmd.Process.Pid))
}

// exitCode waits for the child to exit and returns its status.
func (c *child) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case <-c.waited:
	case <-time.After(waitTimeout):
		require.FailNow(t, "child did not exit", "stderr:\n%s", c.stderr.String())
	}
	return c.state.ExitCode()
}

// waitFile waits until path exists (it is published atomically) and returns
// its content. It waits on inotify events of the directory and on a pidfd of
// pid: it fails as soon as pid exits without having created the file.
func waitFile(t *testing.T, path string, pid int) []byte {
	t.Helper()
	ifd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	require.NoError(t, err)
	defer unix.Close(ifd)
	_, err = unix.InotifyAddWatch(ifd, filepath.Dir(path), unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE|unix.IN_CREATE)
	require.NoError(t, err)
	pfd, err := unix.PidfdOpen(pid, 0)
	require.NoError(t, err)
	defer unix.Close(pfd)
	deadline := time.Now().Add(waitTimeout)
	buf := make([]byte, 4096)
	for exited := false; ; {
		if b, err := os.ReadFile(path); err == nil {
			return b
		}
		require.False(t, exited, "process %d exited before %s appeared", pid, path)
		left := time.Until(deadline)
		require.Positive(t, left, "timed out waiting for %s", path)
		fds := []unix.PollFd{{Fd: int32(ifd), Events: unix.POLLIN}, {Fd: int32(pfd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(left.Milliseconds())+1); err != nil && err != unix.EINTR {
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

// procsReferencing lists the live processes (zombies excluded), other than
// the caller, whose command line or environment contains s.
func procsReferencing(t *testing.T, s string) []owner.Identity {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []owner.Identity
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
		if id, err := owner.Of(pid); err == nil {
			out = append(out, id)
		}
	}
	return out
}

// tmuxEnv is the environment of every tmux client a test runs.
var tmuxEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/", "LC_ALL=C"}

// newTmux starts a private tmux server on socket and returns its identity.
func newTmux(ctx context.Context, socket string) (owner.Identity, error) {
	cmd := exec.CommandContext(ctx, "tmux", "-f", "/dev/null", "-S", socket, "new-session", "-d", "-s", "t", "sleep 100000")
	cmd.Env, cmd.Dir = tmuxEnv, "/"
	if out, err := cmd.CombinedOutput(); err != nil {
		return owner.Identity{}, fmt.Errorf("tmux new-session: %w: %s", err, out)
	}
	cmd = exec.CommandContext(ctx, "tmux", "-S", socket, "display-message", "-p", "#{pid}")
	cmd.Env, cmd.Dir = tmuxEnv, "/"
	out, err := cmd.Output()
	if err != nil {
		return owner.Identity{}, fmt.Errorf("tmux display-message: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return owner.Identity{}, err
	}
	return owner.Of(pid)
}

// requireTmux fails the test loudly when tmux is not installed: a missing
// prerequisite is never a skip.
func requireTmux(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("tmux")
	require.NoError(t, err, "tmux is required by these tests (make tmux installs it)")
}

// noExitSleep is the GORACE setting of a re-executed child: under -race a
// process sleeps atexit_sleep_ms (1 s by default) before it exits, which
// every child's exit would otherwise cost.
func noExitSleep() string {
	return "GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")
}

// mark publishes a marker file atomically (in a child).
func mark(name, content string) {
	dir := os.Getenv(envMarkers)
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err == nil {
		os.Rename(tmp, filepath.Join(dir, name))
	}
}

// waitLine reads stdin until the line want (in a child); EOF means the
// parent went away.
func waitLine(sc *bufio.Scanner, want string) {
	for sc.Scan() {
		if sc.Text() == want {
			return
		}
	}
	os.Exit(99)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
