package journal

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
)

// resolvers runs fn once with openat2 and once with the per-component walk
// that kernels without openat2 use (forceWalk), so both stay tested.
func resolvers(t *testing.T, fn func(t *testing.T)) {
	require.True(t, haveOpenat2(), "kernel 5.6+ with openat2 is a prerequisite of this test")
	for _, walk := range []bool{false, true} {
		t.Run(map[bool]string{false: "openat2", true: "walk"}[walk], func(t *testing.T) {
			forceWalk = walk
			t.Cleanup(func() { forceWalk = false })
			fn(t)
		})
	}
}

// TestOpenParentResolvesWithoutSymlinks: issue 11, bullet 1. A symlink in
// any component of a path inside the root is refused (ELOOP), even one that
// stays inside the root (which os.Root would follow); a missing component is
// ENOENT; a plain path resolves to its parent's descriptor.
func TestOpenParentResolvesWithoutSymlinks(t *testing.T) {
	resolvers(t, func(t *testing.T) {
		r := newRoot(t)
		require.NoError(t, os.MkdirAll(filepath.Join(r.Path(), "a/b"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(r.Path(), "a/b/f"), nil, 0o600))
		require.NoError(t, os.Symlink("records", filepath.Join(r.Path(), "l")))
		require.NoError(t, os.Symlink("b", filepath.Join(r.Path(), "a/lb")))
		require.NoError(t, os.Symlink("/", filepath.Join(r.Path(), "abs")))

		d, base, err := r.OpenParent("a/b/f")
		require.NoError(t, err)
		var st unix.Stat_t
		require.NoError(t, unix.Fstatat(int(d.Fd()), base, &st, unix.AT_SYMLINK_NOFOLLOW))
		assert.Equal(t, "f", base)
		d.Close()

		d, base, err = r.OpenParent("l")
		require.NoError(t, err, "a symlink as the last component is the caller's to inspect")
		assert.Equal(t, "l", base)
		d.Close()

		for _, p := range []string{"l/x.json", "a/lb/f", "abs/etc/passwd", "a/lb/f/g"} {
			_, _, err := r.OpenParent(p)
			require.ErrorIs(t, err, ErrResolve, p)
			require.ErrorIs(t, err, unix.ELOOP, p)
			assert.Contains(t, err.Error(), "symlink")
		}
		_, _, err = r.OpenParent("a/b/f/g")
		require.ErrorIs(t, err, unix.ENOTDIR)
		_, _, err = r.OpenParent("nope/x")
		require.ErrorIs(t, err, fs.ErrNotExist)
		_, _, err = r.OpenParent("../x")
		require.ErrorIs(t, err, ErrBadName)
	})
}

// TestOpenParentRefusesMountCrossing: a mount point inside the root (a
// real tmpfs) is not crossed.
func TestOpenParentRefusesMountCrossing(t *testing.T) {
	resolvers(t, func(t *testing.T) {
		r := newRoot(t)
		mnt := filepath.Join(r.Path(), "mnt")
		require.NoError(t, os.Mkdir(mnt, 0o700))
		require.NoError(t, unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k"))
		t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
		require.NoError(t, os.Mkdir(filepath.Join(mnt, "d"), 0o700))
		_, _, err := r.OpenParent("mnt/d/x")
		require.ErrorIs(t, err, ErrResolve)
		require.ErrorIs(t, err, unix.EXDEV)
		assert.Contains(t, err.Error(), "another mount")
	})
}

// TestOpenRefusesUnsafeAncestor: issue 11, bullet 4. A root under a
// directory that another user owns, or that group or others may write
// without the sticky bit, is refused with exit-1 material: the directory,
// its owner and its mode. A sticky world-writable directory (/tmp) and a
// symlink inside a trusted directory pass.
func TestOpenRefusesUnsafeAncestor(t *testing.T) {
	uid, gid := testroot.SecondUser(t)
	base := testroot.Dir(t)
	mk := func(name string, mode os.FileMode, owner int) string {
		d := filepath.Join(base, name)
		require.NoError(t, os.Mkdir(d, 0o700))
		require.NoError(t, os.Chmod(d, mode))
		require.NoError(t, os.Chown(d, owner, gid))
		root := filepath.Join(d, "root")
		require.NoError(t, os.Mkdir(root, 0o700))
		return root
	}
	for _, c := range []struct {
		name   string
		mode   os.FileMode
		owner  int
		reason string
	}{
		{"foreign", 0o755, uid, "owned by uid " + strconv.Itoa(uid) + " (mode 0755)"},
		{"groupw", 0o775, 0, "mode 0775: writable by group or others without the sticky bit"},
		{"otherw", 0o757, 0, "mode 0757"},
	} {
		root := mk(c.name, c.mode, c.owner)
		_, err := Open(root)
		requireUnsafe(t, err, filepath.Dir(root), c.reason)
		_, err = os.Lstat(filepath.Join(root, "records"))
		require.ErrorIs(t, err, fs.ErrNotExist, "nothing is created in a refused root")
	}
	root := mk("sticky", os.ModeSticky|0o777, 0)
	openRoot(t, root)
	// A symlink in a trusted directory is followed, and its target is
	// walked by the same rule.
	require.NoError(t, os.Symlink("sticky", filepath.Join(base, "link")))
	openRoot(t, filepath.Join(base, "link", "root"))
	require.NoError(t, os.Symlink("foreign", filepath.Join(base, "flink")))
	_, err := Open(filepath.Join(base, "flink", "root"))
	requireUnsafe(t, err, filepath.Join(base, "foreign"), "owned by uid")
	// A symlink loop on the way ends in ELOOP, not in a hang.
	require.NoError(t, os.Symlink("loop2", filepath.Join(base, "loop1")))
	require.NoError(t, os.Symlink("loop1", filepath.Join(base, "loop2")))
	_, err = Open(filepath.Join(base, "loop1", "root"))
	require.ErrorIs(t, err, unix.ELOOP)
}

// TestRootIsNotReResolved: issue 11, bullet 4. Once open, a root is judged
// through the parent descriptor from the same walk: a directory renamed on
// its path does not make it "removed", and RemoveRoot removes the root it
// opened (through the parent's descriptor), not whatever the old path
// names now.
func TestRootIsNotReResolved(t *testing.T) {
	base := testroot.Dir(t)
	require.NoError(t, os.Mkdir(filepath.Join(base, "p"), 0o700))
	path := filepath.Join(base, "p", "root")
	require.NoError(t, os.Mkdir(path, 0o700))
	r := openRoot(t, path)
	require.NoError(t, os.Rename(filepath.Join(base, "p"), filepath.Join(base, "q")))
	// A decoy at the old path: same name, another directory.
	require.NoError(t, os.MkdirAll(path, 0o700))
	assert.False(t, r.Removed(), "the root is still linked in its parent")
	closing, err := r.Closing()
	require.NoError(t, err)
	assert.False(t, closing)
	require.NoError(t, r.MarkClosing())
	x, err := r.TryLockExclusive()
	require.NoError(t, err)
	require.NotNil(t, x)
	require.NoError(t, x.RemoveRoot())
	x.Unlock()
	_, err = os.Lstat(filepath.Join(base, "q", "root"))
	require.ErrorIs(t, err, fs.ErrNotExist, "the root that was opened is removed")
	_, err = os.Lstat(path)
	require.NoError(t, err, "the decoy at the old path is untouched")
	assert.True(t, r.Removed())
}

// TestOpenMissingRootSaysSo: issue 11, bullet 5.
func TestOpenMissingRootSaysSo(t *testing.T) {
	p := filepath.Join(testroot.Dir(t), "nope")
	_, err := Open(p)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, err.Error(), "no root at "+p)
	require.False(t, errors.Is(err, ErrUnsafeRoot))
}
