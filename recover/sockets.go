package recover

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// tmuxPath is the fixed PATH tmux is looked up on and run with: nothing
// from the caller's environment reaches the cleanup client.
const tmuxPath = "/usr/local/bin:/usr/bin:/bin"

// tmuxTimeout bounds one `tmux kill-server`.
var tmuxTimeout = 5 * time.Second

// scrubbedEnv is the whole environment of the cleanup client: no TMUX (which
// would point it at another server), no credentials, nothing inherited.
func scrubbedEnv() []string {
	return []string{"PATH=" + tmuxPath, "HOME=/", "LC_ALL=C"}
}

// socketState is what a recorded socket path holds.
type socketState int

const (
	sockGone    socketState = iota // ENOENT: progress
	sockSilent                     // a socket of ours, nothing answers
	sockAnswers                    // a server accepted the connection
)

// checkSocket validates a recorded socket (inside the root, a socket, owned
// by the effective UID) and probes it with a connect.
func (r *run) checkSocket(name string) (socketState, string, error) {
	if err := journal.CheckLocal(name); err != nil {
		return 0, "", err
	}
	path := filepath.Join(r.root.Path(), name)
	fi, err := r.root.Dir().Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return sockGone, path, nil
	}
	if err != nil {
		return 0, path, fmt.Errorf("socket %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return 0, path, fmt.Errorf("socket %s: not a socket (%v), left in place", path, fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return 0, path, fmt.Errorf("socket %s: not owned by uid %d, left in place", path, os.Geteuid())
	}
	// Through the root's descriptor: a path component swapped since the
	// Lstat cannot redirect the connect.
	c, err := net.DialTimeout("unix", r.root.ConnectPath(name), time.Second)
	if err == nil {
		c.Close()
		return sockAnswers, path, nil
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return sockSilent, path, nil
	case errors.Is(err, syscall.ENOENT):
		return sockGone, path, nil
	}
	return 0, path, fmt.Errorf("socket %s: cannot probe: %w", path, err)
}

// stopTmux stops the tmux server behind a recorded socket, if one answers.
//
// The server's PID comes from the server itself (#{pid}), so it is trusted
// only as far as waiting goes: the server is signalled only when it is the
// record's verified subject; any other process that does not exit is
// reported, never signalled.
func (r *run) stopTmux(ctx context.Context, name string, subject *owner.Identity) (string, error) {
	st, path, err := r.checkSocket(name)
	if err != nil || st != sockAnswers {
		return "", err
	}
	bin := r.opts.Tmux
	if bin == "" {
		bin = "tmux"
	}
	bin, err = lookFixed(bin)
	if err != nil {
		return "", fmt.Errorf("tmux server on %s answers but %w", path, err)
	}
	// kill-server only asks the server to exit, and it answers before the
	// server has exited (it still closes its panes and runs utempter): hold
	// a pidfd on the server first, so that its exit can be awaited. A record
	// in the intent phase names no subject to wait for.
	srv := r.tmuxServer(ctx, bin, name)
	if srv != nil {
		defer srv.Close()
	}
	out, kerr := r.tmuxClient(ctx, bin, name, "kill-server")
	if srv != nil {
		wctx, cancel := context.WithTimeout(ctx, r.opts.Grace)
		err := srv.Wait(wctx)
		cancel()
		if err != nil {
			if subject == nil || srv.Identity() != *subject {
				return "", fmt.Errorf("tmux server pid %d on %s still runs %v after kill-server; it is not the record's subject, so it is not signalled", srv.Identity().PID, path, r.opts.Grace)
			}
			// The recorded subject, still running a grace period after
			// kill-server: end it through the handle.
			if _, err := Terminate(ctx, srv, false, r.opts.Grace); err != nil {
				return "", fmt.Errorf("tmux server on %s: %w", path, err)
			}
		}
	}
	// A server that exits while answering (another record's signal ended
	// it at the same moment) makes kill-server fail; what counts is
	// whether the socket still answers. A listening socket can accept
	// while its server is exiting, so a failed kill is retried (each try
	// is a tmux client run) for up to the grace period before a
	// still-answering socket is reported.
	for deadline := time.Now().Add(r.opts.Grace); kerr != nil; {
		if st, _, _ := r.checkSocket(name); st != sockAnswers {
			break
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("tmux kill-server on %s: %v: %s", path, kerr, out)
		}
		out, kerr = r.tmuxClient(ctx, bin, name, "kill-server")
	}
	return "tmux kill-server on " + name, nil
}

// tmuxClient runs one tmux client on the socket name inside the root, with
// the scrubbed environment, bounded by tmuxTimeout. The client reaches the
// socket through the root's directory descriptor (its fd 3), never through
// a path that could have been swapped.
func (r *run) tmuxClient(ctx context.Context, bin, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, tmuxTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-S", r.root.ChildConnectPath(name)}, args...)...)
	cmd.ExtraFiles = []*os.File{r.root.DirFile()}
	cmd.Env = scrubbedEnv()
	cmd.Dir = "/"
	cmd.WaitDelay = time.Second
	return cmd.CombinedOutput()
}

// tmuxServer returns a verified handle on the tmux server answering on path
// (it reports its own PID; the socket was checked to be ours, and so must
// the process be), or nil.
func (r *run) tmuxServer(ctx context.Context, bin, name string) *owner.Process {
	out, err := r.tmuxClient(ctx, bin, name, "display-message", "-p", "#{pid}")
	if err != nil {
		return nil
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return nil
	}
	id, err := owner.Of(pid)
	if err != nil || id.UID != os.Geteuid() {
		return nil
	}
	p, err := owner.Open(id)
	if err != nil {
		return nil
	}
	return p
}

// unlinkSocket removes a recorded socket once nothing answers on it.
func (r *run) unlinkSocket(name string) (string, error) {
	st, path, err := r.checkSocket(name)
	switch {
	case err != nil:
		return "", err
	case st == sockGone:
		return "", nil
	case st == sockAnswers:
		return "", fmt.Errorf("socket %s still answers, left in place", path)
	}
	if err := r.root.Dir().Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("unlink socket %s: %w", path, err)
	}
	return "unlinked socket " + name, nil
}

// lookFixed finds bin on the fixed tmuxPath, never on the caller's PATH.
func lookFixed(bin string) (string, error) {
	if filepath.IsAbs(bin) {
		return exec.LookPath(bin)
	}
	for _, dir := range filepath.SplitList(tmuxPath) {
		if p, err := exec.LookPath(filepath.Join(dir, bin)); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not installed in %s: %w", bin, tmuxPath, exec.ErrNotFound)
}
