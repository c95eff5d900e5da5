package journal

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/unixmode"
)

// ownDirOf opens a descriptor of its own on directory d (openat(2) of "."
// through d itself, O_NOFOLLOW): a listing needs its own offset, and a
// plain descriptor, unlike one from an os.Root, lets ReadDir trust the
// d_type of getdents instead of stat'ing every entry.
func ownDirOf(d *os.File, name string) (*os.File, error) {
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat(int(d.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, &fs.PathError{Op: "openat", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// readRecordFile opens name in directory descriptor dfd (O_NOFOLLOW,
// O_NONBLOCK: neither a symlink nor a FIFO swapped in after the listing
// can redirect or block it), checks the open file and reads it, all on the
// raw descriptor: no runtime poller registration, no name looked up twice.
// euid is the effective UID the file must belong to.
func readRecordFile(dfd int, dir, name string, euid int) (b []byte, reason string, gone bool) {
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	})
	switch {
	case err == unix.ENOENT:
		return nil, "", true
	case err == unix.ELOOP:
		return nil, "is a symlink", false
	case err != nil:
		return nil, "cannot open: " + (&fs.PathError{Op: "openat", Path: filepath.Join(dir, name), Err: err}).Error(), false
	}
	defer unix.Close(fd)
	scanHook("opened", name)
	var st unix.Stat_t
	if err := retryEINTR0(func() error { return unix.Fstat(fd, &st) }); err != nil {
		return nil, "cannot stat: " + (&fs.PathError{Op: "stat", Path: filepath.Join(dir, name), Err: err}).Error(), false
	}
	perm := fs.FileMode(st.Mode & 0o777)
	switch {
	case uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG:
		return nil, "is not a regular file (" + unixmode.Type(uint32(st.Mode)).String() + ")", false
	case int(st.Uid) != euid:
		return nil, fmt.Sprintf("owned by uid %d, not %d", st.Uid, euid), false
	case perm&0o022 != 0:
		return nil, fmt.Sprintf("mode %04o is group- or world-writable", perm), false
	case st.Nlink > 1:
		// Nlink 0 is a record retired or replaced after the open: what
		// was read is the record as it was a moment ago, not corrupt.
		return nil, fmt.Sprintf("has %d hard links (a link to a file elsewhere?)", st.Nlink), false
	case st.Size > MaxRecordSize:
		return nil, fmt.Sprintf("%d bytes, over the %d-byte limit", st.Size, MaxRecordSize), false
	}
	// At most MaxRecordSize+1 bytes, to EOF: a file that grew since the
	// fstat is refused by Decode, never truncated into belief.
	b = make([]byte, 0, st.Size+1)
	for len(b) <= MaxRecordSize {
		if len(b) == cap(b) {
			b = slices.Grow(b, 512)
		}
		n, err := unix.Read(fd, b[len(b):min(cap(b), MaxRecordSize+1)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, "cannot read: " + (&fs.PathError{Op: "read", Path: filepath.Join(dir, name), Err: err}).Error(), false
		}
		if n == 0 {
			break
		}
		b = b[:len(b)+n]
	}
	return b, "", false
}

// retryEINTR0 is retryEINTR for calls that return only an error.
func retryEINTR0(f func() error) error {
	_, err := retryEINTR(func() (int, error) { return 0, f() })
	return err
}

// withFd runs fn with the raw descriptor of d, kept open meanwhile.
func withFd(d *os.File, fn func(fd int)) error {
	rc, err := d.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(func(fd uintptr) { fn(int(fd)) })
}
