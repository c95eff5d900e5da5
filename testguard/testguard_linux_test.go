package testguard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

func TestMain(m *testing.M) {
	if name := os.Getenv(envChild); name != "" {
		os.Exit(runChild(name))
	}
	os.Exit(Main(m, Options{}))
}

// runFunc adapts a function to M.
type runFunc func() int

func (f runFunc) Run() int { return f() }

// blockForever parks a fake test until the process exits.
func blockForever() int {
	for {
		time.Sleep(time.Hour)
	}
}

// runChild runs one scenario in a re-executed test binary. Each scenario
// calls Main with a fake test run, as a TestMain would.
func runChild(name string) int {
	root := os.Getenv(envRoot)
	in := bufio.NewScanner(os.Stdin)
	opts := Options{Root: root, Grace: 2 * time.Second}
	ctx := context.Background()
	// createTmux publishes an intent record for a tmux server on socket,
	// creates it and publishes the live record, inside adm.
	createTmux := func(adm *Admission, socket string) (owner.Identity, error) {
		rec := &journal.Record{Kind: journal.KindTmux, Label: "test tmux", Sockets: []string{socket}, Phase: journal.PhaseIntent}
		if err := adm.Publish(rec); err != nil {
			return owner.Identity{}, err
		}
		id, err := newTmux(ctx, filepath.Join(root, socket))
		if err != nil {
			return id, err
		}
		rec.Subject, rec.PGID, rec.Phase = &id, id.PID, journal.PhaseLive
		return id, adm.Publish(rec)
	}
	fail := func(err error) int {
		mark("error", err.Error())
		return 1
	}
	switch name {
	case "creator":
		// A test is admitted and SIGTERMed mid-creation (after the
		// intent, before tmux exists); it creates the tmux server only
		// after the cleanup has begun.
		closingHook = func() { mark("closing", "") }
		return Main(runFunc(func() int {
			adm, err := Admit(ctx)
			if err != nil {
				return fail(err)
			}
			rec := &journal.Record{Kind: journal.KindTmux, Label: "test tmux", Sockets: []string{"t-1"}, Phase: journal.PhaseIntent}
			if err := adm.Publish(rec); err != nil {
				return fail(err)
			}
			mark("admitted", "")
			waitLine(in, "go")
			id, err := newTmux(ctx, filepath.Join(root, "t-1"))
			if err != nil {
				return fail(err)
			}
			rec.Subject, rec.PGID, rec.Phase = &id, id.PID, journal.PhaseLive
			if err := adm.Publish(rec); err != nil {
				return fail(err)
			}
			b, _ := json.Marshal(id)
			mark("created", string(b))
			// The gate is closed: a second creator is refused.
			_, lateErr := Admit(ctx)
			if lateErr == nil {
				mark("late-admit", "admitted")
			} else {
				mark("late-admit", lateErr.Error())
				if !errors.Is(lateErr, journal.ErrClosing) {
					mark("late-admit", "wrong error: "+lateErr.Error())
				}
			}
			adm.Done()
			return blockForever()
		}), opts)
	case "leftover":
		// The tests pass and leave a recorded tmux server behind.
		return Main(runFunc(func() int {
			adm, err := Admit(ctx)
			if err != nil {
				return fail(err)
			}
			defer adm.Done()
			id, err := createTmux(adm, "t-1")
			if err != nil {
				return fail(err)
			}
			b, _ := json.Marshal(id)
			mark("created", string(b))
			return 0
		}), opts)
	case "failing":
		return Main(runFunc(func() int { return 1 }), opts)
	case "idle":
		// Tests run, nothing is being created; resources exist.
		return Main(runFunc(func() int {
			adm, err := Admit(ctx)
			if err != nil {
				return fail(err)
			}
			id, err := createTmux(adm, "t-1")
			adm.Done()
			if err != nil {
				return fail(err)
			}
			b, _ := json.Marshal(id)
			mark("created", string(b))
			return blockForever()
		}), opts)
	case "stuck":
		// A creator never finishes: the cleanup must not replay the
		// root under it.
		opts.Wait = 200 * time.Millisecond
		return Main(runFunc(func() int {
			adm, err := Admit(ctx)
			if err != nil {
				return fail(err)
			}
			id, err := createTmux(adm, "t-1")
			if err != nil {
				return fail(err)
			}
			b, _ := json.Marshal(id)
			mark("created", string(b))
			return blockForever()
		}), opts)
	}
	return 2
}

// requireGone asserts that the scenario left nothing: no root, the tmux
// server dead, and no process that references the root. A pane dies of the
// hangup of its terminal just after its server: a process still found is
// awaited on a pidfd (bounded), not polled.
func requireGone(t *testing.T, root string, tmux owner.Identity) {
	t.Helper()
	_, err := os.Lstat(root)
	assert.ErrorIs(t, err, fs.ErrNotExist, "root %s must be removed", root)
	assert.Equal(t, owner.Dead, owner.Check(tmux).State, "tmux server %v must be gone", tmux)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for _, id := range testroot.ProcsReferencing(t, root, owner.Of) {
		p, err := owner.Open(id)
		if err != nil {
			continue
		}
		assert.NoError(t, p.Wait(ctx), "process %v must exit", id)
		p.Close()
	}
	assert.Empty(t, testroot.ProcsReferencing(t, root, owner.Of), "processes referencing %s", root)
}

func identity(t *testing.T, s string) owner.Identity {
	t.Helper()
	var id owner.Identity
	require.NoError(t, json.Unmarshal([]byte(s), &id))
	require.Positive(t, id.PID)
	return id
}

// TestSignalMidCreation: a test binary SIGTERMed while a test is between
// its intent record and the creation of a tmux server waits for that creator
// (the gate is closed: a second creator is refused), then ends the tmux
// server that was created after the signal, removes its root and exits
// 128+15. Further SIGINT/SIGTERM during the cleanup change nothing. A cleanup
// running concurrently with the tests (the seed's testsignal) would have
// scanned before the tmux server existed and leaked it.
func TestSignalMidCreation(t *testing.T) {
	requireTmux(t)
	root := testroot.PrivateDir(t, "ojtg")
	c := startChild(t, "creator", root)
	c.marker(t, "admitted")
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	c.marker(t, "closing")
	// More signals while the cleanup waits: they must not cut it short.
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	_, err := c.stdin.Write([]byte("go\n"))
	require.NoError(t, err)
	require.Equal(t, 128+int(syscall.SIGTERM), c.exitCode(t), "stderr:\n%s", c.stderr.String())
	_, err = os.Stat(filepath.Join(c.markers, "error"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	late, err := os.ReadFile(filepath.Join(c.markers, "late-admit"))
	require.NoError(t, err)
	assert.Contains(t, string(late), "shutting down")
	created, err := os.ReadFile(filepath.Join(c.markers, "created"))
	require.NoError(t, err)
	requireGone(t, root, identity(t, string(created)))
}

// TestSignalWhileIdle: SIGINT while no creator is admitted ends what the
// tests recorded and exits 130.
func TestSignalWhileIdle(t *testing.T) {
	requireTmux(t)
	root := testroot.PrivateDir(t, "ojtg")
	c := startChild(t, "idle", root)
	id := identity(t, c.marker(t, "created"))
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(t, 128+int(syscall.SIGINT), c.exitCode(t), "stderr:\n%s", c.stderr.String())
	requireGone(t, root, id)
}

// TestEndOfRun: when the tests finish, what they left recorded is ended, the
// root removed, and the tests' status returned.
func TestEndOfRun(t *testing.T) {
	requireTmux(t)
	t.Run("passing", func(t *testing.T) {
		root := testroot.PrivateDir(t, "ojtg")
		c := startChild(t, "leftover", root)
		id := identity(t, c.marker(t, "created"))
		require.Equal(t, 0, c.exitCode(t), "stderr:\n%s", c.stderr.String())
		requireGone(t, root, id)
	})
	t.Run("failing", func(t *testing.T) {
		root := testroot.PrivateDir(t, "ojtg")
		c := startChild(t, "failing", root)
		require.Equal(t, 1, c.exitCode(t), "stderr:\n%s", c.stderr.String())
		_, err := os.Lstat(root)
		assert.ErrorIs(t, err, fs.ErrNotExist)
	})
}

// TestStuckCreator: a creator still admitted when the wait bound passes
// keeps the root from being replayed under it; the binary exits 128+n and
// leaves the root, with its records, to recovery, which then ends
// everything.
func TestStuckCreator(t *testing.T) {
	requireTmux(t)
	root := testroot.PrivateDir(t, "ojtg")
	c := startChild(t, "stuck", root)
	id := identity(t, c.marker(t, "created"))
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 128+int(syscall.SIGTERM), c.exitCode(t), "stderr:\n%s", c.stderr.String())
	assert.Contains(t, c.stderr.String(), "left to recovery")
	// The tmux server was not ended behind the creator's back: it is
	// still there, recorded.
	require.Equal(t, owner.Alive, owner.Check(id).State)
	r, err := journal.Open(root)
	require.NoError(t, err)
	defer r.Close()
	rep, err := recover.Run(context.Background(), r, recover.Options{All: true, Grace: 2 * time.Second})
	require.NoError(t, err)
	require.True(t, rep.Clean(), "%+v", rep)
	requireGone(t, root, id)
}

// TestAdmitOutsideMain: without a running Main there is no admission.
func TestAdmitOutsideMain(t *testing.T) {
	curMu.Lock()
	saved := cur
	cur = nil
	curMu.Unlock()
	defer func() {
		curMu.Lock()
		cur = saved
		curMu.Unlock()
	}()
	_, err := Admit(context.Background())
	require.ErrorIs(t, err, ErrNotRunning)
	require.Nil(t, Root())
}

// TestAdmitInMain: the tests of this package run under Main; an admission
// publishes into its root with the test binary as owner.
func TestAdmitInMain(t *testing.T) {
	require.NotNil(t, Root())
	adm, err := Admit(context.Background())
	require.NoError(t, err)
	defer adm.Done()
	rec := &journal.Record{Kind: journal.KindPath, Label: "testguard self-test", Paths: []string{"p"}, Phase: journal.PhaseLive}
	require.NoError(t, adm.Publish(rec))
	self, err := owner.Self()
	require.NoError(t, err)
	require.Equal(t, self, rec.Owner)
	require.NoError(t, Root().Retire(rec.ID))
	adm.Done()
	adm.Done() // idempotent
}
