package journal

// socketPathMax is the usable length of sockaddr_un.sun_path on Linux: 108
// bytes including the terminating NUL (unix(7)).
func socketPathMax() int { return 107 }
