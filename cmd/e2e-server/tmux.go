package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// fixedPath is the PATH of every tmux client the server runs, and of the
// shells in the sessions it creates: nothing from the server's environment
// reaches tmux.
const fixedPath = "/usr/local/bin:/usr/bin:/bin"

// tmuxTimeout bounds one tmux client command.
var tmuxTimeout = 10 * time.Second

// sessionName is the name of the one session in each private tmux server.
const sessionName = "main"

// scrubbedEnv is the whole environment of a tmux client: no TMUX (which would
// point a client at another server), no credentials, nothing inherited
// (invariant 7; the seed's High finding). The sessions' shells inherit it.
func scrubbedEnv() []string {
	return []string{"PATH=" + fixedPath, "HOME=/", "SHELL=/bin/sh", "LC_ALL=C"}
}

// tmuxBinary resolves the tmux binary for one use. It is resolved every time
// so that a binary removed or made non-executable after start is reported,
// never masked: the error names tmux.
func (s *server) tmuxBinary() (string, error) {
	p, err := exec.LookPath(s.cfg.tmux)
	if err != nil {
		return "", fmt.Errorf("tmux unavailable: %w", err)
	}
	return p, nil
}

// tmuxCmd runs one tmux client with a scrubbed environment, in "/", bounded
// by tmuxTimeout, and returns its standard output.
func tmuxCmd(ctx context.Context, bin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, tmuxTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = scrubbedEnv()
	cmd.Dir = "/"
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// newSession starts a private tmux server on socket with one detached
// session running command (the default shell when empty). -f /dev/null: no
// user or system configuration is read.
func newSession(ctx context.Context, bin, socket, command string) error {
	args := []string{"-f", "/dev/null", "-S", socket, "new-session", "-d", "-s", sessionName, "-x", "80", "-y", "24"}
	if command != "" {
		args = append(args, command)
	}
	_, err := tmuxCmd(ctx, bin, args...)
	return err
}

// serverPIDs asks the tmux server on socket for its PID and its pane's.
func serverPIDs(ctx context.Context, bin, socket string) (pid, panePID int, err error) {
	out, err := tmuxCmd(ctx, bin, "-S", socket, "display-message", "-p", "-t", sessionName, "#{pid} #{pane_pid}")
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("tmux display-message: unexpected output %q", out)
	}
	if pid, err = strconv.Atoi(f[0]); err != nil || pid <= 0 {
		return 0, 0, fmt.Errorf("tmux display-message: bad pid %q", f[0])
	}
	if panePID, err = strconv.Atoi(f[1]); err != nil || panePID <= 0 {
		return 0, 0, fmt.Errorf("tmux display-message: bad pane pid %q", f[1])
	}
	return pid, panePID, nil
}

// killServer asks the tmux server on socket to exit. Failure is not
// conclusive (a server exiting meanwhile makes it fail too); callers verify
// the exit on the server's pidfd and on the socket.
func killServer(ctx context.Context, bin, socket string) error {
	_, err := tmuxCmd(ctx, bin, "-S", socket, "kill-server")
	return err
}

// socketState is what a socket path holds.
type socketState int

const (
	sockGone    socketState = iota // ENOENT
	sockSilent                     // a socket of ours, nothing answers
	sockAnswers                    // a server accepted the connection
)

// probeSocket checks that the socket name inside the root is a socket owned
// by the effective UID and probes it with a connect.
func (s *server) probeSocket(name string) (socketState, error) {
	fi, err := s.root.Dir().Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return sockGone, nil
	}
	if err != nil {
		return 0, err
	}
	path := s.socketPath(name)
	if fi.Mode()&fs.ModeSocket == 0 {
		return 0, fmt.Errorf("%s is not a socket (%v)", path, fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return 0, fmt.Errorf("socket %s is not owned by uid %d", path, os.Geteuid())
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	switch {
	case err == nil:
		c.Close()
		return sockAnswers, nil
	case errors.Is(err, syscall.ECONNREFUSED):
		return sockSilent, nil
	case errors.Is(err, syscall.ENOENT):
		return sockGone, nil
	}
	return 0, fmt.Errorf("socket %s: %w", path, err)
}
