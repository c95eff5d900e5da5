package journal

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMarkClosingNeverFollowsASymlink: an entry named closing that is a
// symlink to a record inside the root is refused with its path; the record
// it points at is not overwritten with the marker (os.Root follows such a
// symlink even with O_NOFOLLOW).
func TestMarkClosingNeverFollowsASymlink(t *testing.T) {
	r := newRoot(t)
	rec := publish(t, r, "kept")
	recPath := filepath.Join(r.Path(), recordsDir, rec.ID+".json")
	before, err := os.ReadFile(recPath)
	require.NoError(t, err)
	require.NoError(t, os.Symlink(filepath.Join(recordsDir, rec.ID+".json"), filepath.Join(r.Path(), closingName)))

	err = r.MarkClosing()
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(r.Path(), closingName))
	after, err := os.ReadFile(recPath)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "the record behind the symlink is untouched")
	link, err := os.Readlink(filepath.Join(r.Path(), closingName))
	require.NoError(t, err, "the symlink itself stays")
	assert.Equal(t, filepath.Join(recordsDir, rec.ID+".json"), link)
}

// TestRemoveRootLateWrittenClosingMarker: a participant that checked the
// root was linked just before the tombstone rename writes its marker (with
// the identity of its writer, not empty) into the tombstone; RemoveRoot
// removes it as the journal's own and still removes the root.
func TestRemoveRootLateWrittenClosingMarker(t *testing.T) {
	r := newRoot(t)
	late := openRoot(t, r.Path())
	removeRootHook = func() {
		f, err := late.Dir().OpenFile(closingName, os.O_CREATE|os.O_WRONLY, 0o600)
		require.NoError(t, err)
		require.NoError(t, writeMarker(f))
		require.NoError(t, f.Close())
	}
	t.Cleanup(func() { removeRootHook = func() {} })
	require.NoError(t, teardown(waitCtx(t), r))
	assert.NoDirExists(t, r.Path())
	noTombstones(t, r.Path())
}

// TestCreateAfterSweepRemovedFreshRoot: a sweep that removes the fresh,
// still empty root between Create's mkdir and its open does not make
// Create fail with "no root": the root is made again and leased.
func TestCreateAfterSweepRemovedFreshRoot(t *testing.T) {
	withTmpBase(t)
	t.Setenv("XDG_RUNTIME_DIR", "")
	swept := 0
	createHook = func() {
		if swept == 0 {
			base, err := DefaultBase()
			require.NoError(t, err)
			require.NoError(t, os.Remove(filepath.Join(base, "fresh")))
		}
		swept++
	}
	t.Cleanup(func() { createHook = func() {} })
	r, err := Create("fresh")
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, 2, swept, "made again once")
	assert.True(t, r.HoldsLease())
	assert.False(t, r.Removed())
}
