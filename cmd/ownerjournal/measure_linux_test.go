package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// TestRecoverManyOrphansWallTime measures `recover --all --grace 1s` on 50
// orphans that ignore SIGTERM. Each one needs SIGTERM, the whole grace
// period, then SIGKILL; escalated one after another that would take at least
// 50 s, escalated concurrently (invariant 6) about one grace period. The
// figure is logged, not asserted: no test asserts a wall time.
func TestRecoverManyOrphansWallTime(t *testing.T) {
	t.Parallel()
	const n = 50
	const grace = time.Second
	root := newRoot(t)
	dir := workDir(t)
	dead := deadOwner(t, dir)

	procs := make([]*proc, n)
	for i := range procs {
		procs[i] = helper(t, "sleep", filepath.Join(dir, fmt.Sprintf("o%d", i)), "-ignore-term")
	}
	r, err := journal.Open(root)
	require.NoError(t, err)
	ids := make([]owner.Identity, n)
	for i, p := range procs {
		p.await(t, filepath.Join(dir, fmt.Sprintf("o%d.id", i)))
		ids[i] = p.id
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		err := r.Publish(ctx, &journal.Record{Kind: journal.KindProcess, Label: fmt.Sprintf("o%d", i), Subject: &ids[i], Owner: dead, Phase: journal.PhaseLive})
		cancel()
		require.NoError(t, err)
	}
	require.NoError(t, r.Close())

	t0 := time.Now()
	rep, _, code := recoverReport(t, "--all", "--grace", grace.String(), "--root", root)
	wall := time.Since(t0)
	require.Equal(t, 0, code)
	require.True(t, rep.RootRemoved, "root kept: %s", rep.RootKept)
	require.Len(t, rep.Actions, n)
	for i, id := range ids {
		requireDead(t, id, "orphan")
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("o%d.sig", i)))
		require.NoError(t, err, "orphan %d must get SIGTERM first", i)
		require.Equal(t, "SIGTERM\n", string(b))
	}
	requireRootGone(t, root)
	t.Logf("recover --all --grace %v on %d TERM-ignoring orphans: wall time %v (process start included), report elapsed %v = %.2f grace periods; one after another it would take at least %v",
		grace, n, wall.Round(time.Millisecond), rep.Elapsed.Round(time.Millisecond), float64(rep.Elapsed)/float64(grace), n*grace)
}
