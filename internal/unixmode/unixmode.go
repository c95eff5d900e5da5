//go:build unix

// Package unixmode maps the file type bits of a stat(2) st_mode to Go's
// fs.FileMode, for code that stats through raw descriptors (fstat,
// fstatat) and reports what it found.
package unixmode

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// Type is the fs.FileMode type of st_mode (0 for a regular file).
func Type(mode uint32) fs.FileMode {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return 0
}
