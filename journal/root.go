package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/ownerjournal/ownerjournal/internal/errs"
)

// Sentinel errors. Callers branch on them with [errors.Is].
var (
	// ErrUnsafeRoot: a base or root is a symlink, owned by another user,
	// accessible to group or others, not a directory, or too long to hold
	// a Unix socket path.
	ErrUnsafeRoot = errors.New("journal: unsafe root")
	// ErrClosing: the root is being torn down (or was removed); no new
	// admission is granted.
	ErrClosing = errors.New("journal: root is closing")
	// ErrCorrupt: a record failed its file checks or strict decoding.
	ErrCorrupt = errors.New("journal: corrupt record")
	// ErrNotFound: no record with that id.
	ErrNotFound = errors.New("journal: no such record")
	// ErrBadName: a root name, record id or resource path is not acceptable.
	ErrBadName = errors.New("journal: invalid name")
	// ErrInUse: the root cannot be removed because something in it is live
	// or unaccounted for.
	ErrInUse = errors.New("journal: root in use")
)

// UnsafeError names the path that was refused and why. It wraps
// [ErrUnsafeRoot].
type UnsafeError struct {
	Path   string
	Reason string
}

func (e *UnsafeError) Error() string {
	return fmt.Sprintf("journal: unsafe root %s: %s", e.Path, e.Reason)
}
func (e *UnsafeError) Unwrap() error { return ErrUnsafeRoot }

const (
	lockName    = "lock"
	closingName = "closing"
	recordsDir  = "records"
	leasesDir   = "leases"
)

// MaxSocketName is the length reserved for a socket's name inside a root:
// a root is refused when its path plus "/" plus this many bytes would not fit
// in sockaddr_un.sun_path (see [socketPathMax]).
const MaxSocketName = 24

// Test seams.
var (
	tmpBase = "/tmp"
	geteuid = os.Geteuid
)

// ValidName reports whether name may name a root under the base: 1 to 64
// ASCII letters, digits, '.', '_' and '-', not starting with one of the
// last three.
func ValidName(name string) bool {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	return len(name) >= 1 && len(name) <= 64 && strings.IndexByte(alnum, name[0]) >= 0 &&
		strings.Trim(name, alnum+"._-") == ""
}

// DefaultBase returns the directory under which named roots live, creating
// it (mode 0700) if needed: $XDG_RUNTIME_DIR/ownerjournal when
// XDG_RUNTIME_DIR names an absolute directory owned by the effective UID with
// no group or other access, otherwise /tmp/ownerjournal-<euid>. An existing
// base that is a symlink, owned by another user or group/world accessible is
// refused with an [*UnsafeError]; it is never repaired.
func DefaultBase() (string, error) {
	base := filepath.Join(tmpBase, "ownerjournal-"+strconv.Itoa(geteuid()))
	if x := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		// By name, only to choose a base: nothing found here is trusted
		// later; Open validates the whole path again by descriptor.
		if fi, err := os.Lstat(x); err == nil && checkPrivateDir(x, fi) == nil {
			base = filepath.Join(x, "ownerjournal")
		}
	}
	if err := mkdirPrivate(base); err != nil {
		return "", err
	}
	return base, nil
}

// mkdirPrivate creates dir with mode 0700 if it does not exist and then
// validates it, whether it was created now or found.
//
// These are the only name-based steps (a base or a root being made): they
// decide nothing that is later trusted. [Open] walks the path again from /
// by descriptor and validates every directory on it before anything inside
// is touched.
func mkdirPrivate(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("journal: create %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return checkPrivateDir(dir, fi)
}

// checkPrivateDir is tmux's rule for /tmp/tmux-UID: a real directory, ours,
// with no access for group or others.
func checkPrivateDir(path string, fi fs.FileInfo) error {
	if fi.Mode()&fs.ModeSymlink != 0 {
		return &UnsafeError{path, "is a symlink"}
	}
	if !fi.IsDir() {
		return &UnsafeError{path, "is not a directory"}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return &UnsafeError{path, "cannot read owner"}
	}
	if int(st.Uid) != geteuid() {
		return &UnsafeError{path, fmt.Sprintf("owned by uid %d, not %d", st.Uid, geteuid())}
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return &UnsafeError{path, fmt.Sprintf("mode %04o is accessible to group or others (want 0700)", fi.Mode().Perm())}
	}
	return nil
}

// Root is an open, validated root.
type Root struct {
	path    string
	base    string   // the root's name in its parent
	parent  *os.File // the directory holding the root, from the walk that opened it
	top     *os.File // the root itself, read-only: every name inside is resolved from it
	dev     uint64   // st_dev of the root, for the resolver's no-mount-crossing rule
	dirInfo fs.FileInfo
	dir     *os.Root // the same directory as top, for callers of Dir
	records *os.Root
	recDir  *os.File // records/, kept open to fsync it after renames
	leases  *os.File // leases/

	mu      sync.Mutex
	shared  *fileLock
	sharedN int
	lease   *Lease
}

// Create creates (or validates, if it exists) the root NAME under
// [DefaultBase], opens it and takes the calling process's [Lease] on it
// before returning, so the root is owned from birth: recovery by anyone else
// (an orphans-only sweep of every root in the base included) sees a live
// participant and keeps the root for as long as the creator lives or until
// it calls [Root.Close]. It returns an error wrapping [ErrClosing] when the
// root exists and a teardown has marked it closing.
//
// A daemon's start-up order is therefore: Create (or Open and
// [Root.Lease]), then recovery of what dead predecessors left
// (recover.Run without All, which never removes a root its caller leases),
// then publish and serve.
func Create(name string) (*Root, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("journal: root name %q: %w", name, ErrBadName)
	}
	base, err := DefaultBase()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(base, name)
	// Refuse a too long path before creating anything.
	if err := checkLength(path); err != nil {
		return nil, err
	}
	// A sweep may remove the fresh, still empty root between the mkdir
	// and the lease: make it again (a few times, then report).
	for attempt := 0; ; attempt++ {
		if err := mkdirPrivate(path); err != nil {
			return nil, err
		}
		createHook()
		r, err := Open(path)
		if errors.Is(err, fs.ErrNotExist) && attempt < 3 {
			// Removed between the mkdir and the open.
			continue
		}
		if err != nil {
			return nil, err
		}
		err = r.leaseFromBirth()
		if err == nil {
			return r, nil
		}
		r.Close()
		if !errors.Is(err, ErrClosing) || !r.Removed() || attempt == 3 {
			return nil, err
		}
	}
}

// createHook is a test seam, called by Create between making the root's
// directory and opening it.
var createHook = func() {}

// Open validates an existing root directory and opens it. The root must be
// an absolute or relative path to a directory owned by the effective UID,
// mode 0700 (no group/other bits), not a symlink, and short enough that
// socket names of up to [MaxSocketName] bytes fit inside it. Every directory
// on its path must be owned by root or the effective UID and not writable by
// group or others unless sticky. Otherwise it returns an [*UnsafeError]
// naming the path and the problem. A root that does not exist is an error
// wrapping [fs.ErrNotExist]. The journal's own entries (lock, records/,
// leases/) are created if missing.
//
// The path is resolved once, component by component from "/"; the root and
// its parent stay open, and every later step (lock, admissions, leases,
// records, the closing marker, the removal of the root) goes through those
// descriptors, never through the path again.
func Open(path string) (*Root, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("journal: %s: %w", path, err)
	}
	if err := checkLength(abs); err != nil {
		return nil, err
	}
	rp, err := walkToRoot(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("journal: no root at %s: %w", abs, err)
		}
		var ue *UnsafeError
		if errors.As(err, &ue) {
			return nil, err // it names the path and the reason itself
		}
		return nil, errs.Wrapf(err, "journal: open root %s", abs)
	}
	r := &Root{path: abs, base: rp.base, parent: os.NewFile(uintptr(rp.parent), filepath.Dir(abs)), top: os.NewFile(uintptr(rp.root), abs), dev: uint64(rp.st.Dev)}
	if err := r.init(); err != nil {
		r.closeFiles()
		return nil, err
	}
	return r, nil
}

// checkLength refuses a root whose socket paths would not fit in
// sockaddr_un.sun_path.
func checkLength(abs string) error {
	if max := socketPathMax(); len(abs)+1+MaxSocketName > max {
		return &UnsafeError{abs, fmt.Sprintf("path is %d bytes; a Unix socket path inside it must fit in %d bytes (root at most %d)", len(abs), max, max-1-MaxSocketName)}
	}
	return nil
}

func (r *Root) init() error {
	st, err := r.top.Stat()
	if err != nil {
		return fmt.Errorf("journal: %s: %w", r.path, err)
	}
	if err := checkPrivateDir(r.path, st); err != nil {
		return err
	}
	r.dirInfo = st
	if r.dir, err = rootOf(r.top); err != nil {
		return fmt.Errorf("journal: %s: %w", r.path, err)
	}
	for _, d := range []string{recordsDir, leasesDir} {
		if err := r.mkdirInside(d); err != nil {
			return err
		}
	}
	// O_NONBLOCK: a FIFO in the lock file's place must not block the open.
	lf, err := r.openAt(r.top, lockName, true)
	if err != nil {
		return fmt.Errorf("journal: %s: %w", r.path, err)
	}
	lfi, err := lf.Stat()
	lf.Close()
	if err != nil {
		return fmt.Errorf("journal: %s: %w", r.path, err)
	}
	if st, ok := lfi.Sys().(*syscall.Stat_t); !lfi.Mode().IsRegular() || !ok || int(st.Uid) != geteuid() {
		return &UnsafeError{filepath.Join(r.path, lockName), "lock file is not a regular file of ours"}
	}
	if r.recDir, err = r.openDir(recordsDir); err != nil {
		return err
	}
	if r.records, err = rootOf(r.recDir); err != nil {
		return fmt.Errorf("journal: %s: %w", r.path, err)
	}
	if r.leases, err = r.openDir(leasesDir); err != nil {
		return err
	}
	return nil
}

// closeFiles closes every descriptor the Root holds (those it has).
func (r *Root) closeFiles() error {
	var errs []error
	for _, f := range []*os.File{r.leases, r.recDir, r.top, r.parent} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	for _, d := range []*os.Root{r.records, r.dir} {
		if d != nil {
			errs = append(errs, d.Close())
		}
	}
	return errors.Join(errs...)
}

// ConnectPath returns a path for connect(2) to the socket name inside the
// root that resolves through the root's directory descriptor
// (/proc/self/fd/N/name on Linux). Elsewhere it is the plain path. name
// must be a single entry validated with [CheckLocal].
//
// Deprecated: the name below the descriptor is resolved again at connect
// time. Pin the socket instead: resolve its directory with
// [Root.OpenParent], open it O_PATH|O_NOFOLLOW, check it with fstat and
// connect through /proc/self/fd/N of that descriptor (as recover does).
func (r *Root) ConnectPath(name string) string { return connectPath(r.top, r.path, name) }

// ChildConnectPath is ConnectPath for a child process that receives
// [Root.DirFile] as its first extra file (exec.Cmd.ExtraFiles[0], fd 3).
//
// Deprecated: see [Root.ConnectPath].
func (r *Root) ChildConnectPath(name string) string { return connectPath(nil, r.path, name) }

// DirFile returns the root's directory as an open file, to pass to a child
// with ChildConnectPath. The caller must not close it.
func (r *Root) DirFile() *os.File { return r.top }

// mkdirInside creates a private directory inside the root and checks it.
func (r *Root) mkdirInside(name string) error {
	if err := r.dir.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("journal: %w", err)
	}
	fi, err := r.dir.Lstat(name)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return checkPrivateDir(filepath.Join(r.path, name), fi)
}

// Path returns the root's absolute path.
func (r *Root) Path() string { return r.path }

// Dir returns the root's directory handle, opened through the root's own
// descriptor. Note that [os.Root] follows a symlink in the middle of a path
// as long as it stays inside the root: to act on a path that someone else
// could have changed, resolve it with [Root.OpenParent]. The caller must not
// close it.
func (r *Root) Dir() *os.Root { return r.dir }

// Close releases the root's descriptors, any admission lock and the lease.
func (r *Root) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	if r.lease != nil {
		errs = append(errs, r.lease.release())
		r.lease = nil
	}
	if r.shared != nil {
		errs = append(errs, r.shared.Close())
		r.shared, r.sharedN = nil, 0
	}
	errs = append(errs, r.closeFiles())
	return errors.Join(errs...)
}

// linked reports whether the root's entry in the parent directory opened
// with it still names the directory this Root has open (false once the root
// was removed, renamed to its tombstone or replaced). The path is not
// resolved again: a directory renamed or swapped higher up cannot fool it.
func (r *Root) linked() bool {
	st, err := statAt(r.parent, r.base)
	return err == nil && sameInode(st, r.dirInfo)
}

// Removed reports whether the root this Root opened is no longer at its path
// (another participant removed it).
func (r *Root) Removed() bool { return !r.linked() }

// CheckLocal validates a resource path named by a record or a caller: it must
// be a relative, clean, local path ([filepath.IsLocal]) with no ".."
// components, so it lies inside the root, and it must not be "." (the root
// itself) or hold a NUL byte.
func CheckLocal(p string) error {
	if p == "" || p == "." || !filepath.IsLocal(p) || filepath.Clean(p) != p || strings.ContainsRune(p, 0) {
		return fmt.Errorf("journal: path %q is not inside the root: %w", p, ErrBadName)
	}
	return nil
}
