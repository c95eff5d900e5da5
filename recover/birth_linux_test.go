package recover

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/journal"
)

// childCreator calls journal.Create($OJ_NAME) under the default base of its
// $XDG_RUNTIME_DIR, reports the root's path as "created" and then sits
// there, between Create and Lease, until stdin says "lease"; it reports the
// outcome of Lease as "leased" and holds the root until EOF.
func childCreator() int {
	r, err := journal.Create(os.Getenv("OJ_NAME"))
	if err != nil {
		return fail(err)
	}
	b, _ := json.Marshal(r.Path())
	if err := testroot.Ready("created", b); err != nil {
		return fail(err)
	}
	sc := testroot.Lines()
	if !sc.Scan() || sc.Text() != "lease" {
		return fail(fmt.Errorf("want \"lease\" on stdin"))
	}
	res := ""
	if _, err := r.Lease(); err != nil {
		res = err.Error()
	}
	b, _ = json.Marshal(res)
	if err := testroot.Ready("leased", b); err != nil {
		return fail(err)
	}
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// TestRootOwnedFromBirth: a root that journal.Create returned survives an
// orphans-only recovery by another process (a sweep of every root in the
// base) while its creator has not yet called Lease, and Lease then
// succeeds. Once the creator is dead, the same sweep removes the root.
func TestRootOwnedFromBirth(t *testing.T) {
	xdg := testroot.Dir(t)
	c := testroot.Start(t, "creator", "XDG_RUNTIME_DIR="+xdg, "OJ_NAME=born")
	var path string
	require.NoError(t, json.Unmarshal(c.WaitReady("created"), &path))
	require.Equal(t, filepath.Join(xdg, "ownerjournal", "born"), path)

	// The sweep runs concurrently with the creator, which sits between
	// Create and Lease for as long as the sweep takes.
	sweep := func() *Report {
		r, err := journal.Open(path)
		require.NoError(t, err)
		defer r.Close()
		rep, err := Run(context.Background(), r, Options{})
		require.NoError(t, err)
		return rep
	}
	rep := sweep()
	assert.False(t, rep.RootRemoved)
	assert.Contains(t, rep.RootKept, "lease of live participant pid "+fmt.Sprint(c.PID()))
	assert.True(t, rep.Clean(), "a kept live root is not a retention: %+v", rep)
	require.DirExists(t, path)

	c.Send("lease")
	var leaseErr string
	require.NoError(t, json.Unmarshal(c.WaitReady("leased"), &leaseErr))
	assert.Empty(t, leaseErr)

	c.Kill()
	rep = sweep()
	assert.True(t, rep.RootRemoved, "%+v", rep)
	assert.NoDirExists(t, path)
}

// TestStartupRecoveryBeforeLease: a daemon that runs its start-up recovery
// on the root it just created, before it calls Lease, keeps its root; a
// caller that opened the root with Open and took its lease keeps it too,
// even with records of dead predecessors removed around it.
func TestStartupRecoveryBeforeLease(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", testroot.Dir(t))
	r, err := journal.Create("daemon")
	require.NoError(t, err)
	// A predecessor's stale record: recovery removes it, not the root.
	dead := deadIdentity(t)
	require.NoError(t, r.Publish(context.Background(), &journal.Record{Kind: journal.KindPath, Owner: dead, Phase: journal.PhaseLive}))

	rep, err := Run(context.Background(), r, Options{})
	require.NoError(t, err)
	assert.False(t, rep.RootRemoved)
	assert.Equal(t, "this process holds its lease on the root", rep.RootKept)
	require.Len(t, rep.Actions, 1)
	assert.Equal(t, Stale, rep.Actions[0].Verdict)
	assert.False(t, r.Removed())
	_, err = r.Lease()
	require.NoError(t, err)

	// Open + Lease, then recovery: kept as well.
	require.NoError(t, r.Close())
	r2, err := journal.Open(r.Path())
	require.NoError(t, err)
	defer r2.Close()
	_, err = r2.Lease()
	require.NoError(t, err)
	rep, err = Run(context.Background(), r2, Options{})
	require.NoError(t, err)
	assert.False(t, rep.RootRemoved)
	assert.False(t, r2.Removed())
}

// TestLeaseOnRemovedRoot: Lease on a root another participant removed says
// so in words and wraps journal.ErrClosing.
func TestLeaseOnRemovedRoot(t *testing.T) {
	dir := filepath.Join(testroot.Dir(t), "gone")
	require.NoError(t, os.Mkdir(dir, 0o700))
	r, err := journal.Open(dir)
	require.NoError(t, err)
	defer r.Close()
	other, err := journal.Open(dir)
	require.NoError(t, err)
	rep, err := Run(context.Background(), other, Options{})
	require.NoError(t, err)
	require.True(t, rep.RootRemoved)
	other.Close()

	_, err = r.Lease()
	require.ErrorIs(t, err, journal.ErrClosing)
	assert.Equal(t, "journal: lease on "+dir+": the root was removed", err.Error())
}
