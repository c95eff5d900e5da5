//go:build !linux

package journal

import (
	"os"

	"golang.org/x/sys/unix"
)

// reopenPath is f's name: without /proc/self/fd the directory is opened
// again by name, and rootOf checks it is the one f has open.
func reopenPath(f *os.File) string { return f.Name() }

// renameNoReplace is renameat(2) after a check that to does not exist (no
// renameat2 here; the tombstone's name is random).
func renameNoReplace(dirfd int, from, to string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, to, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		return unix.EEXIST
	}
	return unix.Renameat(dirfd, from, dirfd, to)
}
