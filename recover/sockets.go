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
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/unixmode"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// tmuxPath is the fixed PATH tmux is looked up on and run with: nothing
// from the caller's environment reaches the cleanup client.
const tmuxPath = "/usr/local/bin:/usr/bin:/bin"

// tmuxTimeout bounds one tmux client (display-message, kill-server): a
// server that accepts a connection and does not answer within it is not
// asked again in the same recovery.
var tmuxTimeout = 3 * time.Second

// probeTimeout bounds one connect probe of a recorded socket.
var probeTimeout = time.Second

// maxClients bounds the tmux clients and connect probes of one recovery
// that run at once.
const maxClients = 32

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

// pinnedSocket is a recorded socket resolved once beneath the root and
// held open as an O_PATH descriptor: every probe, tmux client and the final
// unlink act on that inode, never on the name again.
type pinnedSocket struct {
	name     string   // as recorded, relative to the root
	path     string   // for messages
	dir      *os.File // the directory holding it
	base     string   // its name in dir
	f        *os.File // O_PATH|O_NOFOLLOW descriptor of the socket itself
	dev, ino uint64
}

func (s *pinnedSocket) close() {
	s.f.Close()
	s.dir.Close()
}

// socketEntry is one distinct recorded socket of a pass: it is pinned,
// stopped and unlinked at most once however many records name it.
type socketEntry struct {
	pinOnce  sync.Once
	ps       *pinnedSocket // nil when gone
	pinErr   error
	stopOnce sync.Once
	stopMsg  string
	stopErr  error
	rmOnce   sync.Once
	rmMsg    string
	rmErr    error
}

// socketTable de-duplicates the sockets of one pass.
type socketTable struct {
	mu   sync.Mutex
	m    map[string]*socketEntry
	sem  chan struct{} // bounds the probes and clients running at once
	root *journal.Root
}

func newSocketTable(root *journal.Root) *socketTable {
	return &socketTable{m: map[string]*socketEntry{}, sem: make(chan struct{}, maxClients), root: root}
}

func (t *socketTable) entry(name string) *socketEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.m[name]
	if e == nil {
		e = &socketEntry{}
		t.m[name] = e
	}
	return e
}

// pin returns the pinned socket name (nil when it is gone).
func (t *socketTable) pin(name string) (*pinnedSocket, error) {
	e := t.entry(name)
	e.pinOnce.Do(func() { e.ps, e.pinErr = pinSocket(t.root, name) })
	return e.ps, e.pinErr
}

// close releases every pinned socket.
func (t *socketTable) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.m {
		e.pinOnce.Do(func() {}) // nothing pins after close
		if e.ps != nil {
			e.ps.close()
		}
	}
}

// acquire takes a client slot, or fails when ctx ends first.
func (t *socketTable) acquire(ctx context.Context) error {
	select {
	case t.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *socketTable) release() { <-t.sem }

// pinSocket resolves the recorded socket name beneath the root and checks,
// through the descriptor, that it is a socket on the root's filesystem,
// owned by the effective UID, with one link (a hard link or a bind mount of
// a socket elsewhere, a server outside the root, is refused and never
// connected to).
func pinSocket(root *journal.Root, name string) (*pinnedSocket, error) {
	path := filepath.Join(root.Path(), name) // for messages only
	dir, base, err := root.OpenParent(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("socket %s: %w, left in place", path, err)
	}
	f, err := openPathNoFollow(dir, base)
	if errors.Is(err, fs.ErrNotExist) {
		dir.Close()
		return nil, nil
	}
	if err != nil {
		dir.Close()
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	ps := &pinnedSocket{name: name, path: path, dir: dir, base: base, f: f}
	var st, dst unix.Stat_t
	var smnt, dmnt uint64
	err = unix.Fstat(int(f.Fd()), &st)
	if err == nil {
		err = unix.Fstat(int(dir.Fd()), &dst)
	}
	if err == nil {
		smnt, err = mountOf(int(f.Fd()), "")
	}
	if err == nil {
		dmnt, err = mountOf(int(dir.Fd()), "")
	}
	switch {
	case err != nil:
		err = fmt.Errorf("socket %s: %w", path, &fs.PathError{Op: "fstat", Path: path, Err: err})
	case st.Dev != dst.Dev || smnt != dmnt:
		err = fmt.Errorf("socket %s: is on another mount (a bind mount?); never connected to, left in place", path)
	case st.Mode&unix.S_IFMT != unix.S_IFSOCK:
		err = fmt.Errorf("socket %s: not a socket (%v), left in place", path, unixmode.Type(uint32(st.Mode)))
	case int(st.Uid) != os.Geteuid():
		err = fmt.Errorf("socket %s: not owned by uid %d, left in place", path, os.Geteuid())
	case st.Nlink != 1:
		err = fmt.Errorf("socket %s: has %d links (a hard link to a socket elsewhere?); never connected to, left in place", path, st.Nlink)
	}
	if err != nil {
		ps.close()
		return nil, err
	}
	ps.dev, ps.ino = uint64(st.Dev), uint64(st.Ino)
	return ps, nil
}

// probe connects to the pinned socket (through its own descriptor) with a
// short timeout.
func (t *socketTable) probe(ctx context.Context, ps *pinnedSocket) (socketState, error) {
	if err := t.acquire(ctx); err != nil {
		return 0, fmt.Errorf("socket %s: not probed: %w", ps.path, err)
	}
	defer t.release()
	d := net.Dialer{Timeout: probeTimeout}
	c, err := d.DialContext(ctx, "unix", connectPath(ps.f))
	if err == nil {
		c.Close()
		return sockAnswers, nil
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return sockSilent, nil
	case errors.Is(err, syscall.ENOENT):
		return sockGone, nil
	}
	return 0, fmt.Errorf("socket %s: cannot probe: %w", ps.path, err)
}

// stopTmuxAll stops the tmux servers behind a record's sockets, all at
// once; it returns what was done and what failed, in the record's order.
func (r *run) stopTmuxAll(ctx context.Context, names []string, subject *owner.Identity) (done, failed []string) {
	names = unique(names)
	msgs := make([]string, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, s := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msgs[i], errs[i] = r.stopTmux(ctx, s, subject)
		}()
	}
	wg.Wait()
	for i := range names {
		if errs[i] != nil {
			failed = append(failed, errs[i].Error())
		} else if msgs[i] != "" {
			done = append(done, msgs[i])
		}
	}
	return done, failed
}

// stopTmux stops the tmux server behind a recorded socket, if one answers,
// once per pass however many records name the socket.
func (r *run) stopTmux(ctx context.Context, name string, subject *owner.Identity) (string, error) {
	e := r.socks.entry(name)
	e.stopOnce.Do(func() { e.stopMsg, e.stopErr = r.stopTmuxOnce(ctx, name, subject) })
	return e.stopMsg, e.stopErr
}

// stopTmuxOnce stops the tmux server behind a recorded socket, if one
// answers.
//
// The server's PID comes from the server itself (#{pid}), so it is trusted
// only as far as waiting goes: the server is signalled only when it is the
// record's verified subject; any other process that does not exit is
// reported, never signalled. A subject that is stopped (state T) would
// never answer a client: it is ended through its verified handle at once.
// A server that accepts and does not answer within tmuxTimeout is not asked
// again.
func (r *run) stopTmuxOnce(ctx context.Context, name string, subject *owner.Identity) (string, error) {
	ps, err := r.socks.pin(name)
	if err != nil || ps == nil {
		return "", err
	}
	st, err := r.socks.probe(ctx, ps)
	if err != nil || st != sockAnswers {
		return "", err
	}
	if subject != nil && stopped(subject.PID) {
		return r.endStoppedServer(ctx, ps, *subject)
	}
	bin := r.opts.Tmux
	if bin == "" {
		bin = "tmux"
	}
	bin, err = lookFixed(bin)
	if err != nil {
		return "", fmt.Errorf("tmux server on %s answers but %w", ps.path, err)
	}
	// kill-server only asks the server to exit, and it answers before the
	// server has exited (it still closes its panes and runs utempter): hold
	// a pidfd on the server first, so that its exit can be awaited. A record
	// in the intent phase names no subject to wait for.
	srv, err := r.tmuxServer(ctx, bin, ps)
	if errors.Is(err, errNoAnswer) {
		// Nothing is signalled here: a live recorded subject is still
		// ended through its own handle by the caller (endProcesses).
		return "", fmt.Errorf("tmux server on %s accepts connections but %w; no signal sent through the socket", ps.path, err)
	}
	if srv != nil {
		defer srv.Close()
	}
	out, kerr := r.tmuxClient(ctx, bin, ps, "kill-server")
	if srv != nil {
		wctx, cancel := context.WithTimeout(ctx, r.opts.Grace)
		err := srv.Wait(wctx)
		cancel()
		if err != nil {
			if subject == nil || srv.Identity() != *subject {
				return "", fmt.Errorf("tmux server pid %d on %s still runs %v after kill-server; it is not the record's subject, so it is not signalled", srv.Identity().PID, ps.path, r.opts.Grace)
			}
			// The recorded subject, still running a grace period after
			// kill-server: end it through the handle.
			if _, err := Terminate(ctx, srv, false, r.opts.Grace); err != nil {
				return "", fmt.Errorf("tmux server on %s: %w", ps.path, err)
			}
		}
	}
	// A server that exits while answering (another record's signal ended
	// it at the same moment) makes kill-server fail; what counts is
	// whether the socket still answers. A listening socket can accept
	// while its server is exiting, so a failed kill is retried (each try
	// is a tmux client run) for up to the grace period before a
	// still-answering socket is reported. A client that timed out is not
	// retried: the server does not answer.
	for deadline := time.Now().Add(r.opts.Grace); kerr != nil; {
		if errors.Is(kerr, errNoAnswer) || ctx.Err() != nil {
			return "", fmt.Errorf("tmux kill-server on %s: %w", ps.path, kerr)
		}
		if st, _ := r.socks.probe(ctx, ps); st != sockAnswers {
			break
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("tmux kill-server on %s: %v: %s", ps.path, kerr, out)
		}
		out, kerr = r.tmuxClient(ctx, bin, ps, "kill-server")
	}
	return "tmux kill-server on " + name, nil
}

// endStoppedServer ends a recorded tmux server that is stopped (SIGSTOP,
// state T): it can accept but never answer, so no client is run. It gets
// SIGTERM and SIGCONT through its verified handle (so that it exits the
// way it does on SIGTERM), then SIGKILL if it has not exited within the
// grace period.
func (r *run) endStoppedServer(ctx context.Context, ps *pinnedSocket, subject owner.Identity) (string, error) {
	p, err := owner.Open(subject)
	if errors.Is(err, owner.ErrGone) {
		return fmt.Sprintf("tmux server pid %d on %s gone", subject.PID, ps.name), nil
	}
	if err != nil {
		return "", fmt.Errorf("tmux server pid %d on %s is stopped: %w", subject.PID, ps.path, err)
	}
	defer p.Close()
	if err := p.Signal(syscall.SIGTERM); err == nil {
		p.Signal(syscall.SIGCONT)
	}
	msgs, err := Terminate(ctx, p, false, r.opts.Grace)
	if err != nil {
		return "", fmt.Errorf("tmux server pid %d on %s was stopped (state T): %w", subject.PID, ps.path, err)
	}
	return fmt.Sprintf("tmux server pid %d on %s was stopped (state T), not asked: %s", subject.PID, ps.name, joinReasons(msgs)), nil
}

// errNoAnswer: a tmux client ran out of tmuxTimeout (the server accepted
// the connection and never answered). The client was killed by us; this
// says so instead of "signal: killed".
var errNoAnswer = errors.New("does not answer")

// tmuxClient runs one tmux client on the pinned socket, with the scrubbed
// environment, bounded by tmuxTimeout. The client gets the socket's own
// descriptor as its fd 3 and connects through /proc/self/fd/3: no name is
// resolved again.
func (r *run) tmuxClient(ctx context.Context, bin string, ps *pinnedSocket, args ...string) ([]byte, error) {
	if err := r.socks.acquire(ctx); err != nil {
		return nil, err
	}
	defer r.socks.release()
	cctx, cancel := context.WithTimeout(ctx, tmuxTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, append([]string{"-S", childConnectPath()}, args...)...)
	cmd.ExtraFiles = []*os.File{ps.f}
	cmd.Env = scrubbedEnv()
	cmd.Dir = "/"
	// After a kill, output still buffered is not worth waiting for.
	cmd.WaitDelay = 200 * time.Millisecond
	out, err := cmd.CombinedOutput()
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		err = fmt.Errorf("%w within %v (tmux %s killed after the timeout)", errNoAnswer, tmuxTimeout, args[0])
	} else if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("tmux %s cut short: %w", args[0], ctx.Err())
	}
	return out, err
}

// tmuxServer returns a verified handle on the tmux server answering on the
// pinned socket (it reports its own PID; the socket was checked to be ours,
// and so must the process be), or nil. The error is only errNoAnswer (or
// the context's).
func (r *run) tmuxServer(ctx context.Context, bin string, ps *pinnedSocket) (*owner.Process, error) {
	out, err := r.tmuxClient(ctx, bin, ps, "display-message", "-p", "#{pid}")
	if errors.Is(err, errNoAnswer) || ctx.Err() != nil {
		return nil, err
	}
	if err != nil {
		return nil, nil
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return nil, nil
	}
	id, err := owner.Of(pid)
	if err != nil || id.UID != os.Geteuid() {
		return nil, nil
	}
	p, err := owner.Open(id)
	if err != nil {
		return nil, nil
	}
	return p, nil
}

// unlinkSocket removes a recorded socket once nothing answers on it, and
// only while its directory still holds the inode that was pinned.
func (r *run) unlinkSocket(ctx context.Context, name string) (string, error) {
	e := r.socks.entry(name)
	e.rmOnce.Do(func() { e.rmMsg, e.rmErr = r.unlinkSocketOnce(ctx, name) })
	return e.rmMsg, e.rmErr
}

func (r *run) unlinkSocketOnce(ctx context.Context, name string) (string, error) {
	ps, err := r.socks.pin(name)
	if err != nil || ps == nil {
		return "", err
	}
	st, err := r.socks.probe(ctx, ps)
	switch {
	case err != nil:
		return "", err
	case st == sockGone:
		return "", nil
	case st == sockAnswers:
		return "", fmt.Errorf("socket %s still answers, left in place", ps.path)
	}
	var now unix.Stat_t
	if err := ignoringEINTR(func() error { return unix.Fstatat(int(ps.dir.Fd()), ps.base, &now, unix.AT_SYMLINK_NOFOLLOW) }); err != nil {
		if err == unix.ENOENT {
			return "", nil
		}
		return "", fmt.Errorf("unlink socket %s: %w", ps.path, err)
	}
	if uint64(now.Dev) != ps.dev || uint64(now.Ino) != ps.ino {
		return "", fmt.Errorf("socket %s was replaced after it was checked, left in place", ps.path)
	}
	if err := ignoringEINTR(func() error { return unix.Unlinkat(int(ps.dir.Fd()), ps.base, 0) }); err != nil && err != unix.ENOENT {
		return "", fmt.Errorf("unlink socket %s: %w", ps.path, err)
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

// unique is names without repeats, in first-seen order: a record that lists
// a socket eight times says what became of it once.
func unique(names []string) []string {
	seen := make(map[string]bool, len(names))
	out := names[:0:0]
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
