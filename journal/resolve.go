package journal

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrResolve: a name inside a root could not be resolved under the rules of
// [Root.OpenParent]: a component is a symlink, not a directory, or on
// another mount. It is wrapped in the error that names the path.
var ErrResolve = errors.New("journal: unsafe path")

// OpenParent resolves the directory that holds p inside the root and
// returns it open (read-only, close-on-exec) together with p's last
// component, so that the caller can act on that name only through the
// returned descriptor (fstatat(2) with AT_SYMLINK_NOFOLLOW, openat(2) with
// O_NOFOLLOW, unlinkat(2)). p must pass [CheckLocal].
//
// Every component of p's directory is resolved once, with no symlink in any
// component (not even one that stays inside the root) and without crossing
// a mount point: openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
// RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV on Linux 5.6+, elsewhere a walk
// that opens one component at a time with O_NOFOLLOW | O_DIRECTORY and
// compares st_dev with the root's. A refused component is reported with an
// error wrapping [ErrResolve] and the syscall error (ELOOP for a symlink,
// ENOTDIR, EXDEV); a missing one with an error wrapping [fs.ErrNotExist].
// The caller must close the returned file. It is safe for concurrent use.
func (r *Root) OpenParent(p string) (*os.File, string, error) {
	if err := CheckLocal(p); err != nil {
		return nil, "", err
	}
	dir, base := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	f, err := r.openDir(dir)
	if err != nil {
		return nil, "", err
	}
	return f, base, nil
}

// openDir opens the directory rel (a clean local path, or ".") beneath the
// root by the rules of OpenParent.
func (r *Root) openDir(rel string) (*os.File, error) {
	fd, err := resolveDir(int(r.top.Fd()), r.dev, rel)
	if err != nil {
		return nil, resolveError(r.path, rel, err)
	}
	return os.NewFile(uintptr(fd), path.Join(r.path, rel)), nil
}

// resolveError names the path and the rule a failed resolution broke.
func resolveError(root, rel string, err error) error {
	full := path.Join(root, rel)
	var why string
	switch {
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("journal: %s: %w", full, os.ErrNotExist)
	case errors.Is(err, unix.ELOOP):
		why = "a component is a symlink"
	case errors.Is(err, unix.ENOTDIR):
		why = "a component is not a directory"
	case errors.Is(err, unix.EXDEV):
		why = "a component is on another mount"
	default:
		return fmt.Errorf("journal: resolve %s: %w", full, err)
	}
	return fmt.Errorf("journal: %s: %s (%w): %w", full, why, err, ErrResolve)
}

// walkDir is the portable resolver: one openat(2) per component with
// O_NOFOLLOW|O_DIRECTORY (O_PATH for the components before the last where
// the kernel has it), refusing a symlink (ELOOP) and a component whose
// st_dev differs from the root's (EXDEV). It returns a read-only directory
// descriptor of rel.
func walkDir(rootfd int, dev uint64, rel string) (int, error) {
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat(rootfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil || rel == "." {
		return fd, err
	}
	comps := strings.Split(rel, "/")
	for i, c := range comps {
		flags := unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i < len(comps)-1 {
			flags |= oPath
		}
		next, err := retryEINTR(func() (int, error) { return unix.Openat(fd, c, flags, 0) })
		if err != nil {
			// O_NOFOLLOW|O_DIRECTORY on a symlink fails with ENOTDIR
			// on Linux: tell a symlink apart for the report.
			var st unix.Stat_t
			if err == unix.ENOTDIR && unix.Fstatat(fd, c, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = unix.ELOOP
			}
			unix.Close(fd)
			return -1, err
		}
		unix.Close(fd)
		fd = next
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		if uint64(st.Dev) != dev {
			unix.Close(fd)
			return -1, unix.EXDEV
		}
	}
	return fd, nil
}

// retryEINTR calls fn until it fails with something other than EINTR.
func retryEINTR(fn func() (int, error)) (int, error) {
	for {
		fd, err := fn()
		if err != unix.EINTR {
			return fd, err
		}
	}
}
