package journal

import (
	"sync"

	"golang.org/x/sys/unix"
)

// oPath opens a directory only to resolve names below it.
const oPath = unix.O_PATH

// forceWalk makes resolveDir use the per-component walk even where openat2
// exists (a test seam: the walk is the only resolver of older kernels).
var forceWalk = false

// haveOpenat2 reports whether the kernel has openat2(2) (Linux 5.6+).
var haveOpenat2 = sync.OnceValue(func() bool {
	fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC})
	if err == nil {
		unix.Close(fd)
	}
	return err != unix.ENOSYS
})

// resolveDir opens the directory rel beneath rootfd read-only with
// openat2(2): no symlink in any component (RESOLVE_NO_SYMLINKS, which also
// refuses the /proc magic links), nothing outside rootfd (RESOLVE_BENEATH),
// no mount crossing (RESOLVE_NO_XDEV). Without openat2 it walks.
func resolveDir(rootfd int, dev uint64, rel string) (int, error) {
	if forceWalk || !haveOpenat2() {
		return walkDir(rootfd, dev, rel)
	}
	how := &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	}
	for tries := 0; ; tries++ {
		fd, err := unix.Openat2(rootfd, rel, how)
		// EAGAIN: a concurrent rename or mount made the kernel give up
		// a lookup it could not prove safe (openat2(2)); try again.
		if err == unix.EINTR || err == unix.EAGAIN && tries < 16 {
			continue
		}
		if err == unix.ENOTDIR {
			// O_DIRECTORY|O_NOFOLLOW on a last component that is a
			// symlink is ENOTDIR: let the walk say which it is.
			return walkDir(rootfd, dev, rel)
		}
		return fd, err
	}
}
