package recover

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/journal"
)

func depth(p string) int { return strings.Count(p, "/") }

// maxOpenDirs bounds the directory descriptors one removal holds at once;
// shallower levels are reached again through ".." of the level below,
// checked by device and inode.
var maxOpenDirs = 32

// walkHook is a test seam, called after each directory the walk enters
// with the number of levels it holds open.
var walkHook = func(open int) {}

// dirFrame is one directory of the walk: its descriptor (nil while closed
// to bound the descriptors held), identity, its name in its parent and the
// entries still to remove.
type dirFrame struct {
	f        *os.File
	dev, ino uint64
	name     string
	names    []string
}

// removeTree removes p inside root, deepest first, by descriptor: p's
// directory is resolved once beneath the root (no symlink in any component,
// no mount crossing: [journal.Root.OpenParent]); below it every entry is
// inspected with fstatat(AT_SYMLINK_NOFOLLOW) on its directory's
// descriptor, a directory is entered with openat(O_NOFOLLOW|O_DIRECTORY)
// and checked to be the inode inspected, and an entry is removed with
// unlinkat on its directory's descriptor after checking the name still
// refers to that inode. A symlink is removed itself, never followed; a
// directory swapped for a symlink, or moved, while the walk runs fails
// its check and is reported, never followed; so is a mount point (the walk
// never leaves the root's filesystem). Whoever owns a directory
// inside the tree can make the removal fail, never redirect it.
//
// The cost is linear in entries and depth; at most maxOpenDirs descriptors
// are held at once. Every entry is attempted and every error collected;
// ENOENT is progress (invariant 10).
func removeTree(root *journal.Root, p string) error {
	parent, base, err := root.OpenParent(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	defer parent.Close()
	var pst unix.Stat_t
	if err := unix.Fstat(int(parent.Fd()), &pst); err != nil {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	mnt, err := mountOf(int(parent.Fd()), "")
	if err != nil {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	w := &treeWalk{top: p, dev: uint64(pst.Dev), mnt: mnt}
	w.remove(parent, base)
	if len(w.errs) > 0 {
		return fmt.Errorf("remove %s: %w", p, errors.Join(w.errs...))
	}
	return nil
}

type treeWalk struct {
	top       string // the recorded path, for messages
	stack     []*dirFrame
	open      int // frames whose f is open: stack[firstOpen:]
	firstOpen int
	dev, mnt  uint64 // the root's filesystem and mount: the walk never leaves them
	errs      []error
}

// where names an entry of the walk, relative to the root, for messages.
func (w *treeWalk) where(name string) string {
	parts := []string{path.Dir(w.top)}
	for _, f := range w.stack {
		parts = append(parts, f.name)
	}
	return path.Join(append(parts, name)...)
}

func (w *treeWalk) fail(op, name string, err error) {
	w.errs = append(w.errs, &fs.PathError{Op: op, Path: w.where(name), Err: err})
}

// remove removes the entry name of parent and, for a directory, everything
// in it.
func (w *treeWalk) remove(parent *os.File, name string) {
	if !w.enter(parent, name) {
		return
	}
	for len(w.stack) > 0 {
		top := w.stack[len(w.stack)-1]
		if n := len(top.names); n > 0 {
			name := top.names[n-1]
			top.names = top.names[:n-1]
			w.enter(top.f, name)
			continue
		}
		// top is empty: leave it for its parent, then remove it there.
		w.stack = w.stack[:len(w.stack)-1]
		dir := parent
		if len(w.stack) > 0 {
			up := w.stack[len(w.stack)-1]
			if up.f == nil && !w.reopen(top, up) {
				top.f.Close()
				w.unwind()
				return
			}
			dir = up.f
		}
		top.f.Close()
		w.open--
		w.unlink(dir, top.name, top.dev, top.ino, unix.AT_REMOVEDIR)
	}
}

// enter inspects name in dir: anything but a directory is unlinked at
// once; a directory is opened and pushed (its entries listed). It returns
// whether a directory was pushed.
func (w *treeWalk) enter(dir *os.File, name string) bool {
	var st unix.Stat_t
	if err := ignoringEINTR(func() error { return unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) }); err != nil {
		if err != unix.ENOENT {
			w.fail("fstatat", name, err)
		}
		return false
	}
	mnt, err := mountOf(int(dir.Fd()), name)
	if err != nil {
		if err != unix.ENOENT {
			w.fail("statx", name, err)
		}
		return false
	}
	if uint64(st.Dev) != w.dev || mnt != w.mnt {
		w.fail("fstatat", name, errors.New("is on another mount; left in place"))
		return false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		w.unlink(dir, name, uint64(st.Dev), uint64(st.Ino), 0)
		return false
	}
	var fd int
	err = ignoringEINTR(func() (err error) {
		fd, err = unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		if err != unix.ENOENT {
			w.fail("openat", name, err)
		}
		return false
	}
	f := os.NewFile(uintptr(fd), name)
	var got unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil || uint64(got.Dev) != uint64(st.Dev) || uint64(got.Ino) != uint64(st.Ino) {
		f.Close()
		w.fail("openat", name, errors.New("replaced while being inspected; left in place"))
		return false
	}
	names, err := f.Readdirnames(-1)
	if errors.Is(err, fs.ErrNotExist) {
		// Removed since it was opened (getdents on a directory that
		// was rmdir'ed): another recoverer got there first. Progress.
		f.Close()
		return false
	}
	if err != nil {
		w.fail("readdir", name, err)
		// Attempt what was listed; the rmdir of a directory that stays
		// non-empty then reports it too.
	}
	w.stack = append(w.stack, &dirFrame{f: f, dev: uint64(st.Dev), ino: uint64(st.Ino), name: name, names: names})
	if w.open++; w.open > maxOpenDirs {
		// Close the shallowest open level; it is reached again through
		// ".." when the walk climbs back to it.
		fr := w.stack[w.firstOpen]
		fr.f.Close()
		fr.f = nil
		w.open--
		w.firstOpen++
	}
	walkHook(w.open)
	return true
}

// reopen opens up (closed to bound descriptors) again as ".." of child,
// and checks it is the directory that was walked: a level moved meanwhile
// is not followed.
func (w *treeWalk) reopen(child, up *dirFrame) bool {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Openat(int(child.f.Fd()), "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		w.fail("openat", child.name+"/..", err)
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || uint64(st.Dev) != up.dev || uint64(st.Ino) != up.ino {
		unix.Close(fd)
		w.stack = append(w.stack, child)
		w.fail("openat", "..", errors.New("a directory was moved during removal; the rest is left in place"))
		w.stack = w.stack[:len(w.stack)-1]
		return false
	}
	up.f = os.NewFile(uintptr(fd), up.name)
	w.open++
	w.firstOpen = len(w.stack) - 1 // up is the top; every level below it is closed
	return true
}

// unwind closes every level still held after a walk that cannot go on.
func (w *treeWalk) unwind() {
	for _, fr := range w.stack {
		if fr.f != nil {
			fr.f.Close()
		}
	}
	w.stack, w.open, w.firstOpen = nil, 0, 0
}

// unlink removes name from dir if it is still the inode (dev, ino) that
// was inspected. ENOENT is progress.
func (w *treeWalk) unlink(dir *os.File, name string, dev, ino uint64, flags int) {
	var st unix.Stat_t
	if err := ignoringEINTR(func() error { return unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) }); err != nil {
		if err != unix.ENOENT {
			w.fail("fstatat", name, err)
		}
		return
	}
	if uint64(st.Dev) != dev || uint64(st.Ino) != ino {
		w.fail("unlinkat", name, errors.New("replaced while being removed; left in place"))
		return
	}
	if err := ignoringEINTR(func() error { return unix.Unlinkat(int(dir.Fd()), name, flags) }); err != nil && err != unix.ENOENT {
		w.fail("unlinkat", name, err)
	}
}

// ignoringEINTR calls fn again while it fails with EINTR.
func ignoringEINTR(fn func() error) error {
	for {
		if err := fn(); err != unix.EINTR {
			return err
		}
	}
}
