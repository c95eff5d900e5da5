package testguard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

// ErrNotRunning is returned by [Admit] outside [Main].
var ErrNotRunning = errors.New("testguard: Main is not running")

// DefaultWait is the default bound on waiting for admitted creators once
// cleanup has begun.
const DefaultWait = 30 * time.Second

// M is what Main runs: *testing.M.
type M interface{ Run() int }

// Options configures Main.
type Options struct {
	// Root is an existing private directory (mode 0700, ours) to use as
	// the test binary's root. Empty means a fresh root
	// "test-<pid>-<random>" under [journal.DefaultBase]. Either way the
	// cleanup removes the root once everything recorded in it is ended.
	Root string
	// Wait bounds the wait for admitted creators once cleanup has begun.
	// Zero means DefaultWait.
	Wait time.Duration
	// Grace is passed to recovery (SIGTERM to SIGKILL); zero means
	// recover.DefaultGrace.
	Grace time.Duration
	// Tmux is the tmux binary recovery uses for kill-server; empty means
	// "tmux" on a fixed PATH.
	Tmux string
	// Log receives the cleanup's progress. Nil means os.Stderr after a
	// signal and nothing at the normal end of the tests. What the cleanup
	// could not end is always reported on os.Stderr.
	Log io.Writer
}

// gate is the running Main's state.
type gate struct {
	root *journal.Root
	self owner.Identity
	opts Options
	// signalled reports whether the cleanup runs because of a signal.
	signalled func() bool

	mu     sync.Mutex
	closed bool
	active int
	idle   chan struct{} // closed when closed and active == 0
}

var (
	curMu sync.Mutex
	cur   *gate
)

// closingHook is called once the gate is closed, before admitted creators
// are awaited (a test seam).
var closingHook = func() {}

// Main runs the tests under the guard and returns the exit status for
// os.Exit: the tests' status, or 128+n when signal n arrived (even if the
// tests are still running). See the package documentation for the order of
// the cleanup.
func Main(m M, opts Options) int {
	if opts.Wait <= 0 {
		opts.Wait = DefaultWait
	}
	g, err := open(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testguard: %v\n", err)
		return 1
	}
	curMu.Lock()
	if cur != nil {
		curMu.Unlock()
		g.root.Close()
		fmt.Fprintln(os.Stderr, "testguard: Main is already running")
		return 1
	}
	cur = g
	curMu.Unlock()
	defer func() {
		curMu.Lock()
		cur = nil
		curMu.Unlock()
	}()

	var guard *recover.Guard
	g.signalled = func() bool { return guard.Signal() != nil }
	ctx, guard := recover.NewGuard(context.Background(), g.cleanup)
	ran := make(chan int, 1)
	go func() { ran <- m.Run() }()
	code := 0
	select {
	case code = <-ran:
	case <-ctx.Done():
		fmt.Fprintf(os.Stderr, "testguard: %v: ending what the tests created in %s\n", guard.Signal(), g.root.Path())
	}
	cerr := guard.Cleanup()
	if cerr != nil {
		fmt.Fprintf(os.Stderr, "testguard: %v\n", cerr)
	}
	if guard.Signal() != nil {
		// Keep catching signals until the caller exits.
		return guard.ExitCode()
	}
	guard.Stop()
	if guard.Signal() != nil {
		return guard.ExitCode()
	}
	if cerr != nil && code == 0 {
		code = 1
	}
	return code
}

func open(opts Options) (*gate, error) {
	self, err := owner.Self()
	if err != nil {
		return nil, err
	}
	var root *journal.Root
	if opts.Root != "" {
		root, err = journal.Open(opts.Root)
	} else {
		var b [3]byte
		rand.Read(b[:])
		root, err = journal.Create("test-" + strconv.Itoa(self.PID) + "-" + hex.EncodeToString(b[:]))
	}
	if err != nil {
		return nil, err
	}
	if _, err := root.Lease(); err != nil {
		root.Close()
		return nil, err
	}
	return &gate{root: root, self: self, opts: opts, idle: make(chan struct{})}, nil
}

// cleanup closes the gate, waits for admitted creators, and replays the
// root with All. It is the guard's cleanup: it runs once.
func (g *gate) cleanup(ctx context.Context) error {
	g.mu.Lock()
	g.closed = true
	if g.active == 0 {
		close(g.idle)
	}
	g.mu.Unlock()
	closingHook()
	t := time.NewTimer(g.opts.Wait)
	defer t.Stop()
	select {
	case <-g.idle:
	case <-t.C:
		g.mu.Lock()
		n := g.active
		g.mu.Unlock()
		// Replaying now could miss what those creators make after the
		// scan: leave the root, with its records, to recovery.
		return fmt.Errorf("%d creator(s) still admitted after %v: root %s left to recovery (ownerjournal recover --root %s --all)", n, g.opts.Wait, g.root.Path(), g.root.Path())
	}
	logw := g.opts.Log
	if logw == nil && g.signalled() {
		logw = os.Stderr
	}
	rep, err := recover.Run(ctx, g.root, recover.Options{All: true, Grace: g.opts.Grace, Tmux: g.opts.Tmux, Log: logw})
	if err != nil {
		return fmt.Errorf("recover %s: %w", g.root.Path(), err)
	}
	g.root.Close()
	if !rep.Clean() {
		return fmt.Errorf("recover %s: %d item(s) retained, root kept: %s", g.root.Path(), rep.Retained, rep.RootKept)
	}
	return nil
}

// Admission is a permission to create resources, granted by [Admit]. While
// it is held, the cleanup waits.
type Admission struct {
	g    *gate
	adm  *journal.Admission
	once sync.Once
}

// Admit grants an admission: the test binary's own gate first (closed once
// cleanup begins: the error then wraps [journal.ErrClosing]), then the
// root's shared lock, waiting up to ctx. It returns [ErrNotRunning] outside
// Main. Call Done when the resource is recorded live (or creation failed).
func Admit(ctx context.Context) (*Admission, error) {
	curMu.Lock()
	g := cur
	curMu.Unlock()
	if g == nil {
		return nil, ErrNotRunning
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, fmt.Errorf("testguard: test binary is shutting down: %w", journal.ErrClosing)
	}
	g.active++
	g.mu.Unlock()
	adm, err := g.root.Admit(ctx)
	if err != nil {
		g.leave()
		return nil, err
	}
	return &Admission{g: g, adm: adm}, nil
}

func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.active--; g.active == 0 && g.closed {
		close(g.idle)
	}
}

// Publish publishes rec atomically in the test binary's root. An Owner left
// zero is filled in with the test binary's identity. It works after cleanup
// has begun: an admitted creator can always record what it made.
func (a *Admission) Publish(rec *journal.Record) error {
	if rec.Owner == (owner.Identity{}) {
		rec.Owner = a.g.self
	}
	return a.adm.Publish(rec)
}

// Done releases the admission. It is idempotent.
func (a *Admission) Done() {
	a.once.Do(func() {
		a.adm.Done()
		a.g.leave()
	})
}

// Root returns the test binary's root, or nil outside Main. Resources whose
// sockets or paths are recorded must live inside it.
func Root() *journal.Root {
	curMu.Lock()
	defer curMu.Unlock()
	if cur == nil {
		return nil
	}
	return cur.root
}
