// Command e2e-server is a real HTTP server that creates private tmux servers
// through the ownerjournal creation gate and shuts down in the right order.
// It is the project's own end-to-end subject and its reference integration.
//
// Usage:
//
//	e2e-server [--root DIR] [--addr HOST:PORT] [--ready-file PATH] [--tmux PATH]
//	           [--grace D] [--drain-timeout D] [--creator-wait D]
//
// The root is --root DIR, else $OWNERJOURNAL_ROOT. The server holds a lease on
// the root for its whole life. At start it recovers orphans left in the root
// by dead participants (never what a live one owns), keeping the root.
//
// Endpoints:
//
//	POST   /sessions       create a private tmux server; answers {id, socket, pid, ...}
//	GET    /sessions       list the sessions of the current state
//	DELETE /sessions/{id}  end one tmux server (verified), unlink its socket, retire its record
//	PUT    /scratch/{name} write the request body into the current state's scratch directory
//	POST   /reset          end every tmux server and start over with fresh state
//	GET    /healthz        liveness, with the tmux binary in use
//
// A tmux server is created inside an admission: the server's own gate (closed
// when shutdown or reset begins) and the root's shared lock. An intent record
// naming the socket is published before `tmux new-session` runs, and updated
// to live with the tmux server's identity after. tmux runs from the binary
// given by --tmux (default: "tmux" looked up on PATH) with a scrubbed
// environment; when it is missing or not executable, POST /sessions answers
// 503 with a body that names tmux. Nothing wraps or fakes it.
//
// Shutdown (SIGINT, SIGTERM, SIGHUP; later signals never cut it short):
// close the gate, wait (bounded) for admitted creators, end the tmux servers,
// drain HTTP handlers (bounded), end what late creators made, destroy the
// state only once every handler has finished (otherwise leave it, recorded,
// to recovery), retire the records, exit 128+n.
//
// Test hooks: OJ_E2E_CRASH_AT=STAGE[@N] makes the server write a marker file
// named STAGE into $OJ_E2E_MARKER_DIR at the Nth time (default 1) it reaches
// STAGE, and then block until it is killed. OJ_E2E_PAUSE_AT=STAGE[@N][,...]
// writes the marker the same way and waits for a line "STAGE" on standard
// input. Stages: see the stage constants in stage.go.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/renameio/v2"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

const (
	exitFail  = 1
	exitUsage = 2
)

// envRoot names the root when --root is not given.
const envRoot = "OWNERJOURNAL_ROOT"

func main() { os.Exit(Main(os.Args[1:], os.Stdin, os.Stderr)) }

// config is the parsed command line.
type config struct {
	root        string
	addr        string
	readyFile   string
	tmux        string
	grace       time.Duration
	drain       time.Duration
	creatorWait time.Duration
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	f := flag.NewFlagSet("e2e-server", flag.ContinueOnError)
	f.SetOutput(stderr)
	f.StringVar(&c.root, "root", os.Getenv(envRoot), "journal root (default $"+envRoot+")")
	f.StringVar(&c.addr, "addr", "127.0.0.1:0", "address to listen on")
	f.StringVar(&c.readyFile, "ready-file", "", "write {pid, addr} here, atomically, once listening")
	f.StringVar(&c.tmux, "tmux", "tmux", "tmux binary (a name is looked up on PATH)")
	f.DurationVar(&c.grace, "grace", recover.DefaultGrace, "time between SIGTERM and SIGKILL when a tmux server does not exit")
	f.DurationVar(&c.drain, "drain-timeout", 10*time.Second, "bound on draining HTTP handlers at shutdown and reset")
	f.DurationVar(&c.creatorWait, "creator-wait", 30*time.Second, "bound on waiting for admitted creators at shutdown and reset")
	if err := f.Parse(args); err != nil {
		return c, err
	}
	switch {
	case f.NArg() != 0:
		return c, fmt.Errorf("unexpected arguments %q", f.Args())
	case c.root == "":
		return c, fmt.Errorf("no root: pass --root DIR or set %s", envRoot)
	case c.tmux == "":
		return c, errors.New("--tmux must not be empty")
	case c.grace <= 0 || c.drain <= 0 || c.creatorWait <= 0:
		return c, errors.New("--grace, --drain-timeout and --creator-wait must be positive")
	}
	return c, nil
}

// Main runs the server until a signal ends it and returns the exit status:
// 128+n after signal n, 1 on failure, 2 on a usage error.
func Main(args []string, stdin io.Reader, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "e2e-server: %v\n", err)
		return exitUsage
	}
	logger := log.New(stderr, fmt.Sprintf("e2e-server[%d]: ", os.Getpid()), log.Lmicroseconds)
	stages, err := stagesFromEnv(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "e2e-server: %v\n", err)
		return exitUsage
	}
	s, err := newServer(cfg, logger, stages)
	if err != nil {
		logger.Print(err)
		return exitFail
	}
	// The guard is installed before anything is created or announced: from
	// here on the first signal means an orderly shutdown, and further
	// signals never cut it short (invariant 11).
	ctx, guard := recover.NewGuard(context.Background(), s.shutdown)
	if err := s.start(); err != nil {
		logger.Print(err)
		guard.Cleanup()
		guard.Stop()
		return exitFail
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		logger.Print(err)
		guard.Cleanup()
		guard.Stop()
		return exitFail
	}
	served := make(chan error, 1)
	go func() { served <- s.http.Serve(ln) }()
	if cfg.readyFile != "" {
		if err := writeReady(cfg.readyFile, s.self, ln.Addr().String(), s.root.Path()); err != nil {
			logger.Print(err)
			guard.Cleanup()
			guard.Stop()
			return exitFail
		}
	}
	logger.Printf("listening on %s, root %s", ln.Addr(), s.root.Path())
	select {
	case <-ctx.Done():
		logger.Printf("%v: shutting down", guard.Signal())
	case err := <-served:
		logger.Printf("serve: %v", err)
	}
	if err := guard.Cleanup(); err != nil {
		logger.Printf("shutdown: %v", err)
	}
	code := guard.ExitCode()
	if guard.Signal() == nil {
		// Serving failed without a signal.
		code = exitFail
	}
	logger.Printf("exit %d", code)
	return code
}

// ready is the content of the ready file.
type ready struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
	Addr      string `json:"addr"`
	Root      string `json:"root"`
}

// writeReady publishes the ready file atomically (temp file, fsync, rename):
// a reader sees the whole document or nothing.
func writeReady(path string, self owner.Identity, addr, root string) error {
	b, err := json.Marshal(ready{PID: self.PID, StartTime: self.StartTime, Addr: addr, Root: root})
	if err != nil {
		return err
	}
	if err := renameio.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("ready file: %w", err)
	}
	return nil
}

// newHTTPServer returns the HTTP server for s; handlers run with a base
// context that is never cancelled by shutdown, so a drained handler finishes
// its work.
func newHTTPServer(h http.Handler, logger *log.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          logger,
	}
}

// openRoot opens the root and takes the server's lease on it.
func openRoot(path string) (*journal.Root, error) {
	r, err := journal.Open(path)
	if err != nil {
		return nil, err
	}
	if _, err := r.Lease(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}
