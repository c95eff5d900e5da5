package journal

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// reopenPath names the directory f has open through the /proc/self/fd
// magic link of f itself: never through a path that could have been
// swapped since f was opened.
func reopenPath(f *os.File) string {
	return "/proc/self/fd/" + strconv.FormatUint(uint64(f.Fd()), 10)
}

// renameNoReplace is renameat2(2) with RENAME_NOREPLACE.
func renameNoReplace(dirfd int, from, to string) error {
	for {
		err := unix.Renameat2(dirfd, from, dirfd, to, unix.RENAME_NOREPLACE)
		if err != unix.EINTR {
			return err
		}
	}
}
