package recover

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/cgroup"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// ownGroup creates a cgroup named as `ownerjournal run` names its groups,
// moves the process pid into it, and removes it at cleanup if it is left.
func ownGroup(t *testing.T, h cgroup.Hierarchy, name string, pid int) *cgroup.Group {
	t.Helper()
	g, err := h.Create(name)
	require.NoError(t, err)
	t.Cleanup(func() {
		if g.FD() >= 0 {
			g.Kill(t.Context())
			g.Remove()
			g.Close()
		}
	})
	require.NoError(t, os.WriteFile(filepath.Join(g.Path(), "cgroup.procs"), []byte(strconv.Itoa(pid)), 0))
	return g
}

// TestCgroupBoundByID: recovery acts on a recorded cgroup only while the
// group at its path has the recorded cgroup id. A group removed and made
// again under the same name (with a live process inside) is retained with
// the reason, not killed; so is a group recorded without its id. The group
// with the recorded id is killed and removed.
func TestCgroupBoundByID(t *testing.T) {
	h, err := cgroup.Detect()
	require.NoError(t, err, "the tests run as root with cgroup v2")
	var rnd [8]byte
	rand.Read(rnd[:])
	name := "oj-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(rnd[:])
	r, _ := openRoot(t)
	dead := deadIdentity(t)

	// The recorded group, then removed and made again by the same name,
	// with a bystander inside.
	first, err := h.Create(name)
	require.NoError(t, err)
	recorded, err := first.ID()
	require.NoError(t, err)
	require.NoError(t, first.Remove())
	require.NoError(t, first.Close())
	bystander := startSleeper(t)
	again := ownGroup(t, h, name, bystander.ID.PID)
	now, err := again.ID()
	require.NoError(t, err)
	require.NotEqual(t, recorded, now, "a new group gets a new id")

	replaced := publish(t, r, &journal.Record{Owner: dead, Cgroup: again.Path(), CgroupID: recorded, Phase: journal.PhaseIntent})
	rep, err := Run(t.Context(), r, Options{Grace: time.Second})
	require.NoError(t, err)
	a := actionFor(t, rep, replaced.ID)
	assert.Contains(t, a.Retained, "recorded "+strconv.FormatUint(recorded, 10), a.Reason)
	assert.False(t, rep.Clean())
	requireState(t, owner.Alive, bystander.ID, "process in the group that replaced the recorded one")
	assert.DirExists(t, again.Path())
	require.NoError(t, r.Retire(replaced.ID))

	// Without an id (as version 1 recorded groups): left alone too.
	noID := publish(t, r, &journal.Record{Owner: dead, Cgroup: again.Path(), Phase: journal.PhaseIntent})
	rep, err = Run(t.Context(), r, Options{Grace: time.Second})
	require.NoError(t, err)
	assert.Contains(t, actionFor(t, rep, noID.ID).Retained, "without its id")
	requireState(t, owner.Alive, bystander.ID, "process in a group recorded without id")
	require.NoError(t, r.Retire(noID.ID))

	// The group as recorded now: killed and removed.
	match := publish(t, r, &journal.Record{Owner: dead, Cgroup: again.Path(), CgroupID: now, Phase: journal.PhaseIntent})
	rep, err = Run(t.Context(), r, Options{Grace: time.Second})
	require.NoError(t, err)
	a = actionFor(t, rep, match.ID)
	assert.Empty(t, a.Retained)
	assert.Contains(t, joinReasons(a.Done), "cgroup.kill on "+again.Path())
	awaitGone(t, bystander.ID)
	assert.NoDirExists(t, again.Path())
	assert.True(t, rep.Clean(), "%+v", rep)
}
