//go:build !linux

package journal

import (
	"os"
	"path/filepath"
)

// socketPathMax is the usable length of sockaddr_un.sun_path on darwin and
// the BSDs: 104 bytes including the terminating NUL (unix(4)).
func socketPathMax() int { return 103 }

// connectPath is the plain path: darwin's /dev/fd does not resolve names
// below a directory descriptor.
func connectPath(_ *os.File, root, name string) string { return filepath.Join(root, name) }
