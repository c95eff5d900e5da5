//go:build !linux

package journal

// socketPathMax is the usable length of sockaddr_un.sun_path on darwin and
// the BSDs: 104 bytes including the terminating NUL (unix(4)).
func socketPathMax() int { return 103 }
