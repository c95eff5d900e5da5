package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// maxLinks bounds the symlinks followed on the way to a root (SYMLOOP_MAX
// of Linux is 40).
const maxLinks = 40

// rootPath is the outcome of the walk to a root: its parent and the root
// itself, both open, from one walk.
type rootPath struct {
	parent int // the directory holding the root (O_PATH where the kernel has it)
	root   int // the root, read-only
	base   string
	st     unix.Stat_t // of root, through its descriptor
}

// walkToRoot opens abs (an absolute, clean path) one component at a time
// from "/", so that what is validated is what is used: every directory on
// the way must be owned by root or the caller and not writable by group or
// others unless sticky (tmux's rule for its socket directory, OpenSSH's
// StrictModes); otherwise another user could rename an entry of it and swap
// the root for a directory of their choosing. A symlink on the way (not the
// root itself) is followed only inside a directory that passed, and its
// target is walked by the same rule. The root must not be a symlink; the
// caller checks the rest of it. Errors name the directory, its owner and its
// mode ([*UnsafeError]) or wrap the syscall error (ENOENT for a missing
// component).
func walkToRoot(abs string) (rp *rootPath, err error) {
	euid := geteuid()
	var stack []int // descriptors of the directories walked, "/" first
	defer func() {
		for _, fd := range stack {
			unix.Close(fd)
		}
	}()
	openTrusted := func(dirfd int, name, shown string) error {
		fd, err := retryEINTR(func() (int, error) {
			return unix.Openat(dirfd, name, oPath|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		})
		if err != nil {
			return &os.PathError{Op: "open", Path: shown, Err: err}
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return &os.PathError{Op: "fstat", Path: shown, Err: err}
		}
		stack = append(stack, fd)
		mode := uint32(st.Mode)
		switch {
		case int(st.Uid) != 0 && int(st.Uid) != euid:
			return &UnsafeError{shown, fmt.Sprintf("directory on the root's path is owned by uid %d (mode %04o), not by root or uid %d", st.Uid, mode&0o7777, euid)}
		case mode&0o022 != 0 && mode&unix.S_ISVTX == 0:
			return &UnsafeError{shown, fmt.Sprintf("directory on the root's path (owner uid %d) has mode %04o: writable by group or others without the sticky bit", st.Uid, mode&0o7777)}
		}
		return nil
	}
	if err := openTrusted(unix.AT_FDCWD, "/", "/"); err != nil {
		return nil, err
	}
	comps := strings.Split(strings.TrimPrefix(abs, "/"), "/")
	if abs == "/" || len(comps) == 0 {
		return nil, &UnsafeError{abs, "is not a directory a root can be"}
	}
	shown := []string{""} // the path walked so far, for messages
	links := 0
	for len(comps) > 1 {
		c := comps[0]
		comps = comps[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) > 1 {
				unix.Close(stack[len(stack)-1])
				stack = stack[:len(stack)-1]
				shown = shown[:len(shown)-1]
			}
			continue
		}
		cur := stack[len(stack)-1]
		here := strings.Join(append(shown, c), "/")
		var st unix.Stat_t
		if err := unix.Fstatat(cur, c, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return nil, &os.PathError{Op: "lstat", Path: here, Err: err}
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			if links++; links > maxLinks {
				return nil, &os.PathError{Op: "open", Path: abs, Err: unix.ELOOP}
			}
			target, err := readlinkat(cur, c)
			if err != nil {
				return nil, &os.PathError{Op: "readlink", Path: here, Err: err}
			}
			if strings.HasPrefix(target, "/") {
				for _, fd := range stack[1:] {
					unix.Close(fd)
				}
				stack, shown = stack[:1], shown[:1]
			}
			comps = append(strings.Split(strings.Trim(target, "/"), "/"), comps...)
			continue
		}
		if err := openTrusted(cur, c, here); err != nil {
			return nil, err
		}
		shown = append(shown, c)
	}
	base := comps[0]
	if base == "" || base == "." || base == ".." {
		return nil, &UnsafeError{abs, "does not end in a directory name"}
	}
	parent := stack[len(stack)-1]
	full := filepath.Join(strings.Join(shown, "/"), base)
	if len(shown) == 1 {
		full = "/" + base
	}
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat(parent, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		var st unix.Stat_t
		if unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFLNK:
				return nil, &UnsafeError{abs, "is a symlink"}
			case unix.S_IFDIR:
			default:
				return nil, &UnsafeError{abs, "is not a directory"}
			}
		}
		return nil, &os.PathError{Op: "open", Path: full, Err: err}
	}
	rp = &rootPath{parent: parent, root: fd, base: base}
	if err := unix.Fstat(fd, &rp.st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: full, Err: err}
	}
	stack = stack[:len(stack)-1] // the parent is the caller's now
	return rp, nil
}

// readlinkat reads the target of the symlink name in dirfd.
func readlinkat(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}
