package recover

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Guard keeps SIGINT, SIGTERM and SIGHUP caught while a cleanup runs, so a
// second or third signal never cuts it short (invariant 11). The first
// signal cancels the guard's context; the process then calls
// [Guard.Cleanup] and exits with [Guard.ExitCode]:
//
//	ctx, g := recover.NewGuard(context.Background(), cleanup)
//	defer g.Stop()
//	... work with ctx ...
//	<-ctx.Done() // or: work finished
//	err := g.Cleanup()
//	os.Exit(g.ExitCode())
//
// A Guard is safe for concurrent use: Cleanup runs fn once, and concurrent
// callers wait for that same run and get its error.
type Guard struct {
	fn     func(context.Context) error
	ch     chan os.Signal
	cancel context.CancelFunc
	once   sync.Once
	err    error

	mu      sync.Mutex
	first   os.Signal
	count   int
	stopped chan struct{}
	stop    sync.Once
}

// NewGuard starts catching SIGINT, SIGTERM and SIGHUP. The returned context
// is cancelled at the first of them. fn receives a context that is not
// cancelled by further signals.
func NewGuard(parent context.Context, fn func(context.Context) error) (context.Context, *Guard) {
	ctx, cancel := context.WithCancel(parent)
	g := &Guard{fn: fn, ch: make(chan os.Signal, 8), cancel: cancel, stopped: make(chan struct{})}
	signal.Notify(g.ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go g.loop()
	return ctx, g
}

func (g *Guard) loop() {
	for {
		select {
		case s := <-g.ch:
			g.mu.Lock()
			if g.first == nil {
				g.first = s
			}
			g.count++
			g.mu.Unlock()
			g.cancel()
		case <-g.stopped:
			return
		}
	}
}

// Signal returns the first signal caught, or nil.
func (g *Guard) Signal() os.Signal {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.first
}

// Signals returns how many signals were caught so far.
func (g *Guard) Signals() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.count
}

// Cleanup runs the cleanup once; concurrent and later callers wait for that
// run and return its error. Signals stay caught throughout.
func (g *Guard) Cleanup() error {
	g.once.Do(func() { g.err = g.fn(context.WithoutCancel(context.Background())) })
	return g.err
}

// ExitCode is 128+n for the first signal caught, else 0 (or 1 when the
// cleanup failed).
func (g *Guard) ExitCode() int {
	if s, ok := g.Signal().(syscall.Signal); ok {
		return 128 + int(s)
	}
	if g.err != nil {
		return 1
	}
	return 0
}

// Stop stops catching signals. Call it only after Cleanup has returned.
func (g *Guard) Stop() {
	g.stop.Do(func() {
		signal.Stop(g.ch)
		close(g.stopped)
		g.cancel()
	})
}
