//go:build !linux

package recover

import (
	"errors"
	"fmt"
	"os"
)

// openPathNoFollow needs O_PATH, which only Linux has: a recorded socket
// cannot be pinned here and is left in place.
func openPathNoFollow(dir *os.File, name string) (*os.File, error) {
	return nil, fmt.Errorf("pinning a socket by descriptor: %w", errors.ErrUnsupported)
}

func connectPath(f *os.File) string { return f.Name() }

func childConnectPath() string { return "" }

// stopped is not known here; a stopped server costs a client timeout.
func stopped(pid int) bool { return false }
