package testguard

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
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

// child is a re-executed test binary running one scenario.
type child struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stderr  *testroot.Buffer
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
	c := &child{cmd: cmd, stderr: &testroot.Buffer{}, markers: markers, waited: make(chan struct{})}
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
	return string(testroot.WaitFileWithin(t, filepath.Join(c.markers, name), c.cmd.Process.Pid, waitTimeout))
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
