package recover

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// TestMain dispatches the re-executed child processes of the tests (see
// internal/testroot).
func TestMain(m *testing.M) {
	// Race-enabled children would sleep a second at exit (to let other
	// goroutines report); the tests start many.
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	testroot.Main(m, map[string]func() int{
		"sleeper":   childSleeper,
		"member":    childMember,
		"recoverer": childRecoverer,
		"guard":     childGuard,
		"creator":   childCreator,
		"starved":   childStarved,
		"swapper":   childSwapper,
		"dirswap":   childDirSwapper,
	})
}

// Environment of the children.
const (
	envIgnoreTerm = "OJ_IGNORE_TERM" // "1": record SIGTERM (ready file "term") but live on
	envPgrp       = "OJ_PGRP"        // "1": lead a process group of one's own
	envMembers    = "OJ_MEMBERS"     // N: start N members of one's group
	envRoot       = "OJ_ROOT"        // the recoverer's root
	envStage      = "OJ_STAGE"       // the stage at which the recoverer stops
	envAll        = "OJ_ALL"         // "1": the recoverer runs with All
)

// sleeperReady is what a sleeper reports in its "id" ready file.
type sleeperReady struct {
	ID      owner.Identity   `json:"id"`
	Members []owner.Identity `json:"members,omitempty"`
}

// childSleeper blocks until killed. With OJ_IGNORE_TERM it survives SIGTERM
// and reports it; with OJ_PGRP it leads a group; with OJ_MEMBERS=N it starts
// N members of its group (which ignore SIGTERM as it does) and reports their
// identities with its own.
func childSleeper() int {
	if os.Getenv(envIgnoreTerm) == "1" {
		ignoreTerm()
	}
	if os.Getenv(envPgrp) == "1" {
		if err := unix.Setpgid(0, 0); err != nil {
			return fail(err)
		}
	}
	var ready sleeperReady
	var err error
	if ready.ID, err = owner.Self(); err != nil {
		return fail(err)
	}
	n, _ := strconv.Atoi(os.Getenv(envMembers))
	for i := 0; i < n; i++ {
		id, err := startMember()
		if err != nil {
			return fail(err)
		}
		ready.Members = append(ready.Members, id)
	}
	b, _ := json.Marshal(ready)
	if err := testroot.Ready("id", b); err != nil {
		return fail(err)
	}
	for {
		time.Sleep(time.Hour)
	}
}

// ignoreTerm records a SIGTERM in the ready file "term" and does not exit.
func ignoreTerm() {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGTERM)
	go func() {
		n := 0
		for range ch {
			n++
			testroot.Ready("term", []byte(strconv.Itoa(n)))
		}
	}()
}

// startMember starts a member of the caller's process group; the member
// writes its identity on its stdout once it is ready.
func startMember() (owner.Identity, error) {
	var id owner.Identity
	exe, err := os.Executable()
	if err != nil {
		return id, err
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "OJ_TEST_CHILD=member")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return id, err
	}
	if err := cmd.Start(); err != nil {
		return id, err
	}
	line, err := bufio.NewReader(out).ReadBytes('\n')
	if err != nil {
		return id, fmt.Errorf("member: %w", err)
	}
	return id, json.Unmarshal(line, &id)
}

func childMember() int {
	if os.Getenv(envIgnoreTerm) == "1" {
		signal.Ignore(syscall.SIGTERM)
	}
	id, err := owner.Self()
	if err != nil {
		return fail(err)
	}
	b, _ := json.Marshal(id)
	fmt.Println(string(b))
	for {
		time.Sleep(time.Hour)
	}
}

// childRecoverer runs Run on OJ_ROOT and stops for good at the stage
// OJ_STAGE, after reporting it in a ready file of that name: the test
// SIGKILLs it there.
func childRecoverer() int {
	stop := os.Getenv(envStage)
	var once atomic.Bool
	stageHook = func(stage string) {
		if stage != stop || !once.CompareAndSwap(false, true) {
			return
		}
		testroot.Ready(stage, nil)
		for {
			time.Sleep(time.Hour)
		}
	}
	r, err := journal.Open(os.Getenv(envRoot))
	if err != nil {
		return fail(err)
	}
	_, err = Run(context.Background(), r, Options{All: os.Getenv(envAll) == "1", Grace: 5 * time.Second})
	if err != nil {
		return fail(err)
	}
	testroot.Ready("finished", nil)
	return 0
}

// childGuard installs a Guard whose cleanup reports "cleaning", waits for a
// line on stdin, and reports "cleaned"; it runs the cleanup from two
// goroutines at the first signal and exits with the guard's status.
func childGuard() int {
	var runs atomic.Int32
	ctx, g := NewGuard(context.Background(), func(context.Context) error {
		runs.Add(1)
		testroot.Ready("cleaning", nil)
		bufio.NewReader(os.Stdin).ReadString('\n')
		return nil
	})
	defer g.Stop()
	testroot.Ready("armed", nil)
	<-ctx.Done()
	done := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() { done <- g.Cleanup() }()
	}
	err := errors.Join(<-done, <-done)
	testroot.Ready("cleaned", []byte(fmt.Sprintf("runs=%d err=%v", runs.Load(), err)))
	return g.ExitCode()
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// sleeper is a started sleeper child and what it reported.
type sleeper struct {
	*testroot.Child
	sleeperReady
}

// startSleeper starts a sleeper child with the given environment and waits
// until it is ready. Members it started are SIGKILLed at cleanup if they
// are still alive.
func startSleeper(t *testing.T, env ...string) *sleeper {
	t.Helper()
	c := testroot.Start(t, "sleeper", env...)
	s := &sleeper{Child: c}
	require.NoError(t, json.Unmarshal(c.WaitReady("id"), &s.sleeperReady))
	t.Cleanup(func() {
		for _, m := range s.Members {
			if p, err := owner.Open(m); err == nil {
				p.Signal(syscall.SIGKILL)
				ctx, cancel := context.WithTimeout(context.Background(), testroot.Timeout)
				p.Wait(ctx)
				cancel()
				p.Close()
			}
		}
	})
	return s
}

// deadIdentity is the identity of a process that has exited and been
// reaped.
func deadIdentity(t *testing.T) owner.Identity {
	t.Helper()
	s := startSleeper(t)
	s.Kill()
	require.Equal(t, owner.Dead, owner.Check(s.ID).State)
	return s.ID
}

// openRoot opens a fresh private root with a short path.
func openRoot(t *testing.T) (*journal.Root, string) {
	t.Helper()
	dir := testroot.Dir(t)
	r, err := journal.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r, dir
}

func publish(t *testing.T, r *journal.Root, rec *journal.Record) *journal.Record {
	t.Helper()
	if rec.Phase == "" {
		rec.Phase = journal.PhaseLive
	}
	if rec.Kind == "" {
		rec.Kind = journal.KindProcess
	}
	ctx, cancel := context.WithTimeout(context.Background(), testroot.Timeout)
	defer cancel()
	require.NoError(t, r.Publish(ctx, rec))
	return rec
}

func requireState(t *testing.T, want owner.State, id owner.Identity, what string) {
	t.Helper()
	v := owner.Check(id)
	require.Equal(t, want, v.State, "%s (pid %d): %v", what, id.PID, v)
}

// awaitGone waits on a verified pidfd until id has exited.
func awaitGone(t *testing.T, id owner.Identity) {
	t.Helper()
	p, err := owner.Open(id)
	if errors.Is(err, owner.ErrGone) {
		return
	}
	require.NoError(t, err)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testroot.Timeout)
	defer cancel()
	require.NoError(t, p.Wait(ctx))
}

// readyPath is where a child's ready file name would be.
func readyPath(c *testroot.Child, name string) string {
	for _, kv := range c.Cmd.Env {
		if v, ok := strings.CutPrefix(kv, "OJ_TEST_READY_DIR="); ok {
			return filepath.Join(v, name)
		}
	}
	return ""
}

// actionFor finds the report's action for record id.
func actionFor(t *testing.T, rep *Report, id string) Action {
	t.Helper()
	for _, a := range rep.Actions {
		if a.ID == id {
			return a
		}
	}
	require.Failf(t, "no action", "record %s is not in the report %+v", id, rep.Actions)
	return Action{}
}
