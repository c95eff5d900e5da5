package journal

import (
	"os"

	"golang.org/x/sys/unix"
)

// allocate makes the file's first size bytes allocated blocks
// (fallocate(2) mode 0), so that later writes elsewhere cannot take them.
func allocate(f *os.File, size int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), 0, 0, size)
		if err != unix.EINTR {
			if err != nil {
				return os.NewSyscallError("fallocate", err)
			}
			return nil
		}
	}
}
