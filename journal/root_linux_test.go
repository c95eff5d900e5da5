package journal

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/owner"
)

// newRoot opens a fresh private root (a short path under /tmp).
func newRoot(t *testing.T) *Root {
	t.Helper()
	return openRoot(t, testroot.Dir(t))
}

// openRoot opens path as a root, closed at cleanup.
func openRoot(t *testing.T, path string) *Root {
	t.Helper()
	r, err := Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

// selfRecord is a live process record whose owner and subject are the test.
func selfRecord(t *testing.T, label string) *Record {
	t.Helper()
	self, err := owner.Self()
	require.NoError(t, err)
	return &Record{Kind: KindProcess, Label: label, Owner: self, Subject: &self, Phase: PhaseLive}
}

// snapshot is what a refused path must still look like afterwards.
type snapshot struct {
	Mode     fs.FileMode
	UID, GID uint32
	Link     string   // symlink target
	Names    []string // directory entries (of the target, for a symlink)
}

func snap(t *testing.T, path string) snapshot {
	t.Helper()
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	s := snapshot{Mode: fi.Mode(), UID: st.Uid, GID: st.Gid}
	dir := path
	if fi.Mode()&fs.ModeSymlink != 0 {
		s.Link, err = os.Readlink(path)
		require.NoError(t, err)
		dir = s.Link
	}
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			s.Names = append(s.Names, e.Name())
		}
		sort.Strings(s.Names)
	}
	return s
}

// requireUnsafe checks err is an *UnsafeError for path whose reason
// contains reason.
func requireUnsafe(t *testing.T, err error, path, reason string) {
	t.Helper()
	require.ErrorIs(t, err, ErrUnsafeRoot)
	var ue *UnsafeError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, path, ue.Path)
	assert.Contains(t, ue.Reason, reason)
	assert.Contains(t, err.Error(), path)
}

// unsafeDirs are the ways a directory can be refused as a base or a root.
// Each setup creates path (inside a private parent) and returns the reason
// expected.
func unsafeDirs(t *testing.T) []struct {
	name  string
	setup func(t *testing.T, path string) string
} {
	uid, gid := testroot.SecondUser(t)
	mkdir := func(mode os.FileMode) func(t *testing.T, path string) string {
		return func(t *testing.T, path string) string {
			require.NoError(t, os.Mkdir(path, 0o700))
			require.NoError(t, os.Chmod(path, mode))
			return "accessible to group or others"
		}
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, path string) string
	}{
		{"symlink to a private dir", func(t *testing.T, path string) string {
			target := testroot.Dir(t)
			require.NoError(t, os.Symlink(target, path))
			return "symlink"
		}},
		{"dangling symlink", func(t *testing.T, path string) string {
			require.NoError(t, os.Symlink(path+".missing", path))
			return "symlink"
		}},
		{"owned by another user", func(t *testing.T, path string) string {
			require.NoError(t, os.Mkdir(path, 0o700))
			require.NoError(t, os.Chown(path, uid, gid))
			return "owned by uid " + strconv.Itoa(uid)
		}},
		{"not a directory", func(t *testing.T, path string) string {
			require.NoError(t, os.WriteFile(path, nil, 0o600))
			return "not a directory"
		}},
	}
	for _, m := range []os.FileMode{0o755, 0o770, 0o707, 0o750, 0o705, 0o701, 0o710, 0o777, 0o720, 0o702} {
		cases = append(cases, struct {
			name  string
			setup func(t *testing.T, path string) string
		}{"mode " + strconv.FormatUint(uint64(m), 8), mkdir(m)})
	}
	return cases
}

// TestOpenRefusesUnsafeRoot: invariant 1. Every unsafe root is refused with
// an error naming the path and the problem, and is left exactly as found:
// not repaired, not used (nothing created inside it).
func TestOpenRefusesUnsafeRoot(t *testing.T) {
	for _, tt := range unsafeDirs(t) {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(testroot.Dir(t), "root")
			reason := tt.setup(t, path)
			before := snap(t, path)
			r, err := Open(path)
			require.Nil(t, r)
			requireUnsafe(t, err, path, reason)
			assert.Equal(t, before, snap(t, path))
		})
	}
}

func TestOpenRefusesTooLongRoot(t *testing.T) {
	parent := testroot.Dir(t)
	max := socketPathMax() - 1 - MaxSocketName
	// A path of exactly the limit is accepted, one byte more is not.
	ok := parent + "/" + strings.Repeat("a", max-len(parent)-1)
	long := ok + "b"
	for _, p := range []string{ok, long} {
		require.NoError(t, os.Mkdir(p, 0o700))
	}
	require.Len(t, ok, max)
	r, err := Open(ok)
	require.NoError(t, err)
	require.NoError(t, r.Close())

	before := snap(t, long)
	r, err = Open(long)
	require.Nil(t, r)
	requireUnsafe(t, err, long, "Unix socket path")
	assert.Equal(t, before, snap(t, long))
}

func TestOpenRelativePath(t *testing.T) {
	parent := testroot.Dir(t)
	require.NoError(t, os.Mkdir(filepath.Join(parent, "ok"), 0o700))
	require.NoError(t, os.Mkdir(filepath.Join(parent, "open"), 0o755))
	t.Chdir(parent)
	r, err := Open("ok")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(parent, "ok"), r.Path())
	require.NoError(t, r.Close())

	_, err = Open("open")
	requireUnsafe(t, err, filepath.Join(parent, "open"), "accessible")
}

func TestOpenMissingRoot(t *testing.T) {
	path := filepath.Join(testroot.Dir(t), "missing")
	_, err := Open(path)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.NoFileExists(t, path)
}

func TestOpenCreatesLayout(t *testing.T) {
	r := newRoot(t)
	for _, n := range []string{recordsDir, leasesDir} {
		fi, err := os.Lstat(filepath.Join(r.Path(), n))
		require.NoError(t, err)
		assert.True(t, fi.IsDir())
		assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm(), n)
	}
	fi, err := os.Lstat(filepath.Join(r.Path(), lockName))
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular())
	assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())

	// Opening again validates what exists.
	r2 := openRoot(t, r.Path())
	assert.Equal(t, r.Path(), r2.Path())
	assert.False(t, r2.Removed())
}

// TestOpenRefusesUnsafeEntries: the journal's own entries inside a valid
// root are checked too, and a FIFO in the lock file's place cannot hang
// Open.
func TestOpenRefusesUnsafeEntries(t *testing.T) {
	uid, gid := testroot.SecondUser(t)
	tests := []struct {
		name   string
		entry  string
		setup  func(t *testing.T, path string)
		reason string
	}{
		{"records is a symlink", recordsDir, func(t *testing.T, path string) {
			require.NoError(t, os.Symlink(testroot.Dir(t), path))
		}, "symlink"},
		{"records is group accessible", recordsDir, func(t *testing.T, path string) {
			require.NoError(t, os.Mkdir(path, 0o700))
			require.NoError(t, os.Chmod(path, 0o750))
		}, "accessible"},
		{"leases owned by another user", leasesDir, func(t *testing.T, path string) {
			require.NoError(t, os.Mkdir(path, 0o700))
			require.NoError(t, os.Chown(path, uid, gid))
		}, "owned by uid"},
		{"lock is a FIFO", lockName, func(t *testing.T, path string) {
			require.NoError(t, syscall.Mkfifo(path, 0o600))
		}, "lock file"},
		{"lock is a directory", lockName, func(t *testing.T, path string) {
			require.NoError(t, os.Mkdir(path, 0o700))
		}, "is a directory"},
		{"lock owned by another user", lockName, func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, nil, 0o600))
			require.NoError(t, os.Chown(path, uid, gid))
		}, "lock file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := testroot.Dir(t)
			path := filepath.Join(root, tt.entry)
			tt.setup(t, path)
			before := snap(t, path)
			done := make(chan error, 1)
			go func() {
				r, err := Open(root)
				if err == nil {
					r.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if tt.entry == lockName && tt.reason == "is a directory" {
					// open(2) refuses it before any check.
					require.ErrorContains(t, err, tt.reason)
					break
				}
				requireUnsafe(t, err, path, tt.reason)
			case <-time.After(testroot.Timeout):
				t.Fatal("Open blocked")
			}
			assert.Equal(t, before, snap(t, path))
		})
	}
}

// withTmpBase points the fallback base directory at a private temp dir.
func withTmpBase(t *testing.T) string {
	t.Helper()
	d := testroot.Dir(t)
	old := tmpBase
	tmpBase = d
	t.Cleanup(func() { tmpBase = old })
	return d
}

// TestDefaultBase: invariant 1. $XDG_RUNTIME_DIR is used only when it is an
// absolute, private directory of ours; anything else falls back to
// <tmp>/ownerjournal-<euid>, created 0700, and leaves XDG_RUNTIME_DIR alone.
func TestDefaultBase(t *testing.T) {
	uid, gid := testroot.SecondUser(t)
	euid := strconv.Itoa(os.Geteuid())
	tests := []struct {
		name     string
		xdg      func(t *testing.T) string
		fallback bool
	}{
		{"private", func(t *testing.T) string { return testroot.Dir(t) }, false},
		{"private, trailing slash", func(t *testing.T) string { return testroot.Dir(t) + "/" }, false},
		{"unset", func(t *testing.T) string { return "" }, true},
		{"mode 0755", func(t *testing.T) string {
			d := testroot.Dir(t)
			require.NoError(t, os.Chmod(d, 0o755))
			return d
		}, true},
		{"mode 0710", func(t *testing.T) string {
			d := testroot.Dir(t)
			require.NoError(t, os.Chmod(d, 0o710))
			return d
		}, true},
		{"missing", func(t *testing.T) string { return filepath.Join(testroot.Dir(t), "missing") }, true},
		{"relative", func(t *testing.T) string { return "run/user/0" }, true},
		{"symlink to a private dir", func(t *testing.T) string {
			l := filepath.Join(testroot.Dir(t), "link")
			require.NoError(t, os.Symlink(testroot.Dir(t), l))
			return l
		}, true},
		{"owned by another user", func(t *testing.T) string {
			d := testroot.Dir(t)
			require.NoError(t, os.Chown(d, uid, gid))
			return d
		}, true},
		{"a file", func(t *testing.T) string {
			f := filepath.Join(testroot.Dir(t), "file")
			require.NoError(t, os.WriteFile(f, nil, 0o600))
			return f
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp := withTmpBase(t)
			xdg := tt.xdg(t)
			t.Setenv("XDG_RUNTIME_DIR", xdg)
			var before snapshot
			if xdg != "" && filepath.IsAbs(xdg) {
				if _, err := os.Lstat(xdg); err == nil {
					before = snap(t, xdg)
				}
			}

			base, err := DefaultBase()
			require.NoError(t, err)
			want := filepath.Join(xdg, "ownerjournal")
			if tt.fallback {
				want = filepath.Join(tmp, "ownerjournal-"+euid)
			}
			assert.Equal(t, want, base)
			fi, err := os.Lstat(base)
			require.NoError(t, err)
			assert.True(t, fi.IsDir())
			assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm())
			if tt.fallback && before.Mode != 0 {
				assert.Equal(t, before, snap(t, xdg), "XDG_RUNTIME_DIR untouched")
			}

			// Idempotent.
			again, err := DefaultBase()
			require.NoError(t, err)
			assert.Equal(t, base, again)
		})
	}
}

func TestDefaultBaseIgnoresUmask(t *testing.T) {
	tmp := withTmpBase(t)
	t.Setenv("XDG_RUNTIME_DIR", "")
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	base, err := DefaultBase()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(tmp, "ownerjournal-"+strconv.Itoa(os.Geteuid())), base)
	fi, err := os.Lstat(base)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm())
	r, err := Create("umask")
	require.NoError(t, err)
	defer r.Close()
	for _, p := range []string{r.Path(), filepath.Join(r.Path(), recordsDir), filepath.Join(r.Path(), leasesDir)} {
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm(), p)
	}
}

// TestDefaultBaseRefusesUnsafe: an existing base that is unsafe is refused
// and left as found, both under XDG_RUNTIME_DIR and in the fallback.
func TestDefaultBaseRefusesUnsafe(t *testing.T) {
	for _, where := range []string{"fallback", "xdg"} {
		for _, tt := range unsafeDirs(t) {
			t.Run(where+"/"+tt.name, func(t *testing.T) {
				tmp := withTmpBase(t)
				var base string
				if where == "xdg" {
					xdg := testroot.Dir(t)
					t.Setenv("XDG_RUNTIME_DIR", xdg)
					base = filepath.Join(xdg, "ownerjournal")
				} else {
					t.Setenv("XDG_RUNTIME_DIR", "")
					base = filepath.Join(tmp, "ownerjournal-"+strconv.Itoa(os.Geteuid()))
				}
				reason := tt.setup(t, base)
				before := snap(t, base)
				got, err := DefaultBase()
				assert.Empty(t, got)
				requireUnsafe(t, err, base, reason)
				assert.Equal(t, before, snap(t, base))

				r, err := Create("run")
				assert.Nil(t, r)
				requireUnsafe(t, err, base, reason)
				assert.Equal(t, before, snap(t, base))
			})
		}
	}
}

func TestCreate(t *testing.T) {
	tmp := withTmpBase(t)
	t.Setenv("XDG_RUNTIME_DIR", "")
	base := filepath.Join(tmp, "ownerjournal-"+strconv.Itoa(os.Geteuid()))

	r, err := Create("run-1")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(base, "run-1"), r.Path())
	fi, err := os.Lstat(r.Path())
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm())
	require.NoError(t, r.Close())
	// Create validates and reuses an existing root.
	r, err = Create("run-1")
	require.NoError(t, err)
	require.NoError(t, r.Close())

	for _, name := range []string{"", ".", "..", "../x", "a/b", "/abs", ".hidden", "-x", "a b", "a\x00b", "a\nb", strings.Repeat("n", 65)} {
		t.Run("bad name "+strconvQuote(name), func(t *testing.T) {
			r, err := Create(name)
			assert.Nil(t, r)
			require.ErrorIs(t, err, ErrBadName)
			assert.Equal(t, []string{"run-1"}, snap(t, base).Names, "nothing created")
		})
	}

	// A valid name whose root path would be too long to hold socket paths
	// is refused before anything is created.
	long := strings.Repeat("n", 64)
	require.Greater(t, len(base)+1+len(long)+1+MaxSocketName, socketPathMax())
	r, err = Create(long)
	assert.Nil(t, r)
	requireUnsafe(t, err, filepath.Join(base, long), "Unix socket path")
	assert.Equal(t, []string{"run-1"}, snap(t, base).Names, "nothing created")

	// An existing unsafe root under a safe base is refused and kept.
	open := filepath.Join(base, "open")
	require.NoError(t, os.Mkdir(open, 0o755))
	require.NoError(t, os.Chmod(open, 0o755))
	_, err = Create("open")
	requireUnsafe(t, err, open, "accessible")
	assert.Equal(t, fs.FileMode(0o755)|fs.ModeDir, snap(t, open).Mode)
}

func strconvQuote(s string) string { return strconv.Quote(s) }

func TestCheckLocal(t *testing.T) {
	for _, p := range []string{"a", "a/b", "sock", ".hidden", "a..b"} {
		assert.NoError(t, CheckLocal(p), p)
	}
	for _, p := range []string{"", ".", "..", "../a", "a/../b", "/a", "a/", "./a", "a//b", "a\x00"} {
		err := CheckLocal(p)
		assert.True(t, errors.Is(err, ErrBadName), "%q: %v", p, err)
	}
}
