package journal

import (
	"os"
	"strconv"
)

// socketPathMax is the usable length of sockaddr_un.sun_path on Linux: 108
// bytes including the terminating NUL (unix(7)).
func socketPathMax() int { return 107 }

// connectPath reaches name through a directory descriptor: d's own in this
// process, or fd 3 in a child (d nil) that got the directory as its first
// extra file. /proc/self/fd/N is a magic link to the open directory itself,
// whatever its path has become.
func connectPath(d *os.File, _ string, name string) string {
	fd := uintptr(3)
	if d != nil {
		fd = d.Fd()
	}
	return "/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10) + "/" + name
}
