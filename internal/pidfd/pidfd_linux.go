// Package pidfd holds the one pidfd probe that both the owner package and the
// CLI's spawner watch need: whether a pidfd says its process has exited.
package pidfd

import "golang.org/x/sys/unix"

// Readable reports whether the pidfd fd is readable, which pidfd_open(2)
// documents as "the process has exited". It never blocks.
func Readable(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}
