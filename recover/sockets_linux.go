package recover

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// openPathNoFollow opens name in dir as an O_PATH descriptor without
// following a symlink: a handle on the inode itself, good for fstat and
// for connect through /proc/self/fd/N, never for reading.
func openPathNoFollow(dir *os.File, name string) (*os.File, error) {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Openat(int(dir.Fd()), name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, &fs.PathError{Op: "openat", Path: filepath.Join(dir.Name(), name), Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir.Name(), name)), nil
}

// connectPath reaches the socket f has open through its /proc/self/fd
// magic link: connect(2) follows it to that very inode, whatever its name
// has become.
func connectPath(f *os.File) string {
	return "/proc/self/fd/" + strconv.FormatUint(uint64(f.Fd()), 10)
}

// childConnectPath is connectPath in a child that got the socket's
// descriptor as its first extra file (fd 3).
func childConnectPath() string { return "/proc/self/fd/3" }

// stopped reports whether pid is stopped (state T, or t when traced) by
// /proc/PID/stat field 3, read after the last ')' of the command name.
func stopped(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] == 'T' || b[i+2] == 't'
}
