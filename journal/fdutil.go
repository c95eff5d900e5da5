package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// statAt is fstatat(2) of name in dir without following a symlink.
func statAt(dir *os.File, name string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "fstatat", Path: filepath.Join(dir.Name(), name), Err: err}
		}
		return &st, nil
	}
}

// sameInode reports whether st is the file fi describes.
func sameInode(st *unix.Stat_t, fi fs.FileInfo) bool {
	s, ok := fi.Sys().(*syscall.Stat_t)
	return ok && uint64(s.Dev) == uint64(st.Dev) && uint64(s.Ino) == uint64(st.Ino)
}

// openAt opens the file name in dir read-only with O_NOFOLLOW, and
// O_NONBLOCK so that a FIFO in its place cannot block the open; create
// adds O_CREAT with mode 0600. It is close-on-exec, so a child the caller
// starts never inherits it (or a lock taken on it).
func (r *Root) openAt(dir *os.File, name string, create bool) (*os.File, error) {
	flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	if create {
		flags |= unix.O_CREAT
		if dir == r.leases {
			// A participant's own lease file: writable, so that its
			// reserve (Lease.Reserve) lives in the same descriptor.
			flags = flags&^unix.O_RDONLY | unix.O_RDWR
		}
	}
	shown := filepath.Join(dir.Name(), name)
	fd, err := retryEINTR(func() (int, error) { return unix.Openat(int(dir.Fd()), name, flags, 0o600) })
	if err != nil {
		return nil, &fs.PathError{Op: "openat", Path: shown, Err: err}
	}
	return os.NewFile(uintptr(fd), shown), nil
}

// unlinkAt removes the entry name of dir only while it is still the file
// fi describes (checked with fstatat(2) just before). ENOENT is progress:
// it returns nil.
func unlinkAt(dir *os.File, name string, fi fs.FileInfo, flags int) error {
	st, err := statAt(dir, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi != nil && !sameInode(st, fi) {
		return fmt.Errorf("journal: %s was replaced; left in place", filepath.Join(dir.Name(), name))
	}
	for {
		err := unix.Unlinkat(int(dir.Fd()), name, flags)
		switch err {
		case unix.EINTR:
			continue
		case nil, unix.ENOENT:
			return nil
		}
		return &fs.PathError{Op: "unlinkat", Path: filepath.Join(dir.Name(), name), Err: err}
	}
}

// rootOf returns an [os.Root] on the directory f has open (see reopenPath),
// checked to be that very directory.
func rootOf(f *os.File) (*os.Root, error) {
	d, err := os.OpenRoot(reopenPath(f))
	if err != nil {
		return nil, err
	}
	a, err1 := d.Stat(".")
	b, err2 := f.Stat()
	if err1 != nil || err2 != nil || !os.SameFile(a, b) {
		d.Close()
		return nil, fmt.Errorf("%s changed while being opened", f.Name())
	}
	return d, nil
}

// renameAt renames from to to inside dir, never replacing an existing to
// (renameat2 RENAME_NOREPLACE where the kernel has it).
func renameAt(dir *os.File, from, to string) error {
	if err := renameNoReplace(int(dir.Fd()), from, to); err != nil {
		return &os.LinkError{Op: "renameat", Old: filepath.Join(dir.Name(), from), New: filepath.Join(dir.Name(), to), Err: err}
	}
	return nil
}
