package recover

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// TestClassifyForgedLeases: leases are per boot. A free lease file that
// names a live owner's PID and start time without its boot (the name
// version 1 used, or one of an earlier boot) does not make the owner dead
// (before, the owner's subject was judged an orphan and killed); a lease
// of an earlier boot held by a live process does not make an owner of that
// boot alive.
func TestClassifyForgedLeases(t *testing.T) {
	t.Parallel()
	r, dir := openRoot(t)
	own, subj := startSleeper(t), startSleeper(t)
	rec := publish(t, r, &journal.Record{Subject: &subj.ID, Owner: own.ID})
	legacy := filepath.Join(dir, "leases", strconv.Itoa(own.ID.PID)+"-"+strconv.FormatUint(own.ID.StartTime, 10))
	require.NoError(t, os.WriteFile(legacy, nil, 0o600))
	earlier := own.ID
	earlier.BootID = "00000000-0000-4000-8000-000000000000"
	old := filepath.Join(dir, "leases", strconv.Itoa(earlier.PID)+"-"+strconv.FormatUint(earlier.StartTime, 10)+"-"+
		strconv.FormatUint(earlier.PIDNS, 10)+"-"+earlier.BootID)
	require.NoError(t, os.WriteFile(old, nil, 0o600))

	st, err := Classify(r)
	require.NoError(t, err)
	require.Len(t, st.Entries, 1)
	e := st.Entries[0]
	assert.Equal(t, InUse, e.Verdict, "free leases of no or another boot are no proof of death: %s", e.Reason)
	assert.Contains(t, e.Reason, "running")

	// Run in orphans mode: nothing is ended.
	rep, err := Run(t.Context(), r, Options{Grace: time.Second})
	require.NoError(t, err)
	assert.Equal(t, InUse, actionFor(t, rep, rec.ID).Verdict)
	requireState(t, owner.Alive, subj.ID, "subject of a live owner")
	require.NoError(t, r.Retire(rec.ID))

	// An owner of an earlier boot whose lease a live process holds (the
	// free one above went with the run's teardown attempt).
	f, err := os.OpenFile(old, os.O_CREATE|os.O_RDONLY, 0o600)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	publish(t, r, &journal.Record{Kind: journal.KindPath, Owner: earlier, Paths: []string{"scratch"}})
	st, err = Classify(r)
	require.NoError(t, err)
	require.Len(t, st.Entries, 1)
	e = st.Entries[0]
	assert.Equal(t, Stale, e.Verdict, e.Reason)
	assert.Contains(t, e.Reason, "earlier boot")
}
