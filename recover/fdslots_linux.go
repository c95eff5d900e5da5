package recover

import (
	"os"

	"golang.org/x/sys/unix"
)

// freeDescriptors returns the soft RLIMIT_NOFILE minus the descriptors open
// now (counted in /proc/self/fd), less a margin of 4 for the runtime and
// the root's own.
func freeDescriptors() (int, bool) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur > 1<<20 {
		return 0, false
	}
	d, err := os.Open("/proc/self/fd") // our own descriptors, not a root's entry
	if err != nil {
		return 0, false
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return 0, false
	}
	return int(lim.Cur) - len(names) - 4, true
}
