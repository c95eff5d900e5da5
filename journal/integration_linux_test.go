package journal

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
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

// TestMarkClosingOnAFullRoot: on a root whose file system has inodes but no
// free page (a real tmpfs filled with fallocate), the marker can be created
// but cannot hold its writer's identity. It still blocks admissions, so
// MarkClosing succeeds: an error would make a teardown report that the
// marker could not block admissions and that they are granted again after
// it, while the marker blocks them and stays.
func TestMarkClosingOnAFullRoot(t *testing.T) {
	mnt := filepath.Join(testroot.PrivateDir(t, "ojfull"), "m")
	require.NoError(t, os.Mkdir(mnt, 0o700))
	require.NoError(t, unix.Mount("tmpfs", mnt, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700,size=256k"))
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	dir := filepath.Join(mnt, "r")
	require.NoError(t, os.Mkdir(dir, 0o700))
	r := openRoot(t, dir)
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(mnt, &st))
	fill, err := os.OpenFile(filepath.Join(mnt, "fill"), os.O_CREATE|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	defer fill.Close()
	require.NoError(t, unix.Fallocate(int(fill.Fd()), 0, 0, int64(st.Bavail)*st.Bsize))
	require.NoError(t, unix.Statfs(mnt, &st))
	require.Zero(t, st.Bavail, "no free page left")

	require.NoError(t, r.MarkClosing())
	closing, err := r.Closing()
	require.NoError(t, err)
	assert.True(t, closing)
	_, err = r.Admit(waitCtx(t))
	require.ErrorIs(t, err, ErrClosing)
	info, err := r.ClosingInfo()
	require.NoError(t, err)
	require.NotNil(t, info)
	assert.Nil(t, info.By, "no room to name the writer")
}
