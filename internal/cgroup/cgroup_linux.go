package cgroup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/owner"
)

// errGone reports internally that the group's directory was removed while
// it was open; callers turn it into their documented result.
var errGone = errors.New("cgroup: group removed")

func detect() (Hierarchy, error) {
	mounts, err := cgroup2Mounts()
	if err != nil {
		return Hierarchy{}, err
	}
	data, err := os.ReadFile(procSelfCgroup)
	if err != nil {
		return Hierarchy{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	self, ok := parseSelfCgroup(data)
	if !ok {
		return Hierarchy{}, fmt.Errorf(`%w: no cgroup v2 membership ("0::" line) in %s`, ErrUnavailable, procSelfCgroup)
	}
	var why reasons
	for _, m := range mounts {
		dir, err := ownDir(m, self)
		if err == nil {
			err = writable(dir)
		}
		if err == nil {
			return Hierarchy{Mount: m.point, Parent: dir}, nil
		}
		why = append(why, fmt.Errorf("own cgroup: %w", err))
		if os.Geteuid() != 0 {
			why = append(why, fmt.Errorf("mount root %s: not running as root", m.point))
			continue
		}
		if err := writable(m.point); err != nil {
			why = append(why, fmt.Errorf("mount root: %w", err))
			continue
		}
		return Hierarchy{Mount: m.point, Parent: m.point}, nil
	}
	return Hierarchy{}, fmt.Errorf("%w: %w", ErrUnavailable, why)
}

// cgroup2Mounts lists the cgroup2 mounts of the calling process, the
// conventional mount points first.
func cgroup2Mounts() ([]mount, error) {
	data, err := os.ReadFile(mountinfoPath)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var ms []mount
	for _, m := range parseMountinfo(data) {
		if m.fstype == "cgroup2" {
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("%w: no cgroup2 filesystem in %s", ErrUnavailable, mountinfoPath)
	}
	rank := func(m mount) int {
		switch m.point {
		case "/sys/fs/cgroup":
			return 0
		case "/sys/fs/cgroup/unified":
			return 1
		}
		return 2
	}
	slices.SortStableFunc(ms, func(a, b mount) int { return cmp.Compare(rank(a), rank(b)) })
	return ms, nil
}

// ownDir maps the caller's cgroup path (relative to its cgroup namespace)
// to a directory under mount m, whose root field says which directory of
// the hierarchy is mounted there.
func ownDir(m mount, self string) (string, error) {
	if !strings.HasPrefix(self, "/") || slices.Contains(strings.Split(self, "/"), "..") {
		return "", fmt.Errorf("%q is outside the caller's cgroup namespace", self)
	}
	rel, ok := within(self, m.root)
	if !ok {
		return "", fmt.Errorf("%q is not under %s (mounted at %s)", self, m.root, m.point)
	}
	return filepath.Join(m.point, rel), nil
}

// within returns p relative to root when p is root or lies under it.
func within(p, root string) (string, bool) {
	switch {
	case root == "/":
		return p, true
	case p == root:
		return "/", true
	case strings.HasPrefix(p, root+"/"):
		return p[len(root):], true
	}
	return "", false
}

// under reports whether p lies strictly inside dir.
func under(p, dir string) bool {
	if dir == "/" {
		return p != "/"
	}
	return strings.HasPrefix(p, dir+"/")
}

// writable checks that groups can be created in dir and processes placed in
// them: dir is on cgroup2, and dir and its cgroup.procs are writable for the
// effective IDs (delegation grants exactly these; cgroup-v2.rst, "Delegation
// Containment"). A read-only mount fails with EROFS even for root.
func writable(dir string) error {
	if err := isCgroup2(dir); err != nil {
		return err
	}
	for _, c := range []struct {
		path string
		mode uint32
	}{{dir, unix.W_OK | unix.X_OK}, {dir + "/cgroup.procs", unix.W_OK}} {
		err := ignoringEINTR(func() error { return unix.Faccessat(unix.AT_FDCWD, c.path, c.mode, unix.AT_EACCESS) })
		if err != nil {
			return &fs.PathError{Op: "access", Path: c.path, Err: err}
		}
	}
	return nil
}

func isCgroup2(dir string) error {
	var st unix.Statfs_t
	if err := ignoringEINTR(func() error { return unix.Statfs(dir, &st) }); err != nil {
		return &fs.PathError{Op: "statfs", Path: dir, Err: err}
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return fmt.Errorf("%s is not on a cgroup2 filesystem", dir)
	}
	return nil
}

func (h Hierarchy) create(name string) (*Group, error) {
	if h.Parent == "" {
		return nil, fmt.Errorf("%w: zero Hierarchy (use Detect)", ErrUnavailable)
	}
	if err := isCgroup2(h.Parent); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	p := filepath.Join(h.Parent, name)
	if err := os.Mkdir(p, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup: create: %w", err)
	}
	g, err := openDir(p)
	if err != nil {
		if rerr := ignoringEINTR(func() error { return unix.Rmdir(p) }); rerr != nil {
			err = errors.Join(err, &fs.PathError{Op: "rmdir", Path: p, Err: rerr})
		}
		return nil, fmt.Errorf("cgroup: create: %w", err)
	}
	return g, nil
}

func openGroup(p string) (*Group, error) {
	if !filepath.IsAbs(p) {
		return nil, fmt.Errorf("%w: %q is not absolute", ErrNotGroup, p)
	}
	if slices.Contains(strings.Split(p, "/"), "..") {
		return nil, fmt.Errorf(`%w: %q contains ".."`, ErrNotGroup, p)
	}
	p = filepath.Clean(p)
	mounts, err := cgroup2Mounts()
	if err != nil {
		return nil, err
	}
	inside := false
	for _, m := range mounts {
		if p == m.point {
			return nil, fmt.Errorf("%w: %s is the root of a cgroup2 mount", ErrNotGroup, p)
		}
		inside = inside || under(p, m.point)
	}
	if !inside {
		return nil, fmt.Errorf("%w: %s is not inside a cgroup2 mount", ErrNotGroup, p)
	}
	g, err := openDir(p)
	switch {
	case err == nil:
		return g, nil
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("%w: %w", ErrNotGroup, err)
	case errors.Is(err, ErrNotGroup):
		return nil, err
	}
	return nil, fmt.Errorf("cgroup: open group: %w", err)
}

func openRecorded(p string, id uint64) (*Group, error) {
	g, err := openGroup(p)
	if err != nil {
		return nil, err
	}
	base := filepath.Dir(g.path)
	if err := writable(base); err != nil {
		g.close()
		return nil, fmt.Errorf("%w: %s does not lie in a base this user may create groups in: %w", ErrNotGroup, g.path, err)
	}
	got, err := g.id()
	if err != nil {
		g.close()
		return nil, err
	}
	if got != id {
		g.close()
		return nil, fmt.Errorf("%w: %s has cgroup id %d, recorded %d", ErrReplaced, g.path, got, id)
	}
	return g, nil
}

func (g *Group) id() (uint64, error) {
	var st unix.Stat_t
	if err := ignoringEINTR(func() error { return unix.Fstat(g.fd, &st) }); err != nil {
		return 0, &fs.PathError{Op: "fstat", Path: g.path, Err: err}
	}
	return st.Ino, nil
}

// openDir opens p as a group and checks, on the opened descriptor, that it
// is a cgroup2 directory.
func openDir(p string) (*Group, error) {
	fd, err := openat(unix.AT_FDCWD, p, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	var st unix.Statfs_t
	if err := ignoringEINTR(func() error { return unix.Fstatfs(fd, &st) }); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "fstatfs", Path: p, Err: err}
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %s is not on a cgroup2 filesystem", ErrNotGroup, p)
	}
	return &Group{path: p, fd: fd, open: true}, nil
}

// openat opens name relative to dirfd, close-on-exec and without following
// a final symlink, retrying EINTR.
func openat(dirfd int, name string, flags int) (int, error) {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Openat(dirfd, name, flags|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		return err
	})
	return fd, err
}

func ignoringEINTR(f func() error) error {
	for {
		if err := f(); err != unix.EINTR {
			return err
		}
	}
}

func (g *Group) close() error {
	if err := unix.Close(g.fd); err != nil {
		return &fs.PathError{Op: "close", Path: g.path, Err: err}
	}
	return nil
}

// file opens name (relative to the group directory) through the directory
// descriptor, so a renamed or replaced path cannot redirect it.
func (g *Group) file(name string, flags int) (*os.File, error) {
	p := filepath.Join(g.path, name)
	fd, err := openat(g.fd, name, flags)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

func (g *Group) readFile(name string) ([]byte, error) {
	f, err := g.file(name, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// writeFile writes one value to a control file; kernfs takes a control
// write in one write(2).
func (g *Group) writeFile(name, value string) error {
	f, err := g.file(name, unix.O_WRONLY)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (g *Group) readEvents() (map[string]string, error) {
	data, err := g.readFile("cgroup.events")
	// ENODEV: the file was opened, then the group was removed before the
	// read (another participant ended the same group: run settling its
	// own while a recoverer waits). A cgroup can only be removed once it
	// is empty, so this is progress, like ENOENT.
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENODEV) {
		return nil, errGone
	}
	if err != nil {
		return nil, err
	}
	return parseEvents(data)
}

// gone reports whether the group's directory was removed: the control
// files of a removed cgroup cannot be opened any more.
func (g *Group) gone() bool {
	_, err := g.readEvents()
	return err == errGone
}

func (g *Group) populated() (bool, error) {
	kv, err := g.readEvents()
	if err == errGone {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return kv["populated"] == "1", nil
}

// subtree returns the group and its descendant groups as paths relative to
// the group, breadth-first: "." first, every group before its children.
// Directories that vanish during the walk are skipped (progress).
func (g *Group) subtree() ([]string, error) {
	dirs := []string{"."}
	var errs []error
	for i := 0; i < len(dirs); i++ {
		f, err := g.file(dirs[i], unix.O_RDONLY|unix.O_DIRECTORY)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ents, err := f.ReadDir(-1)
		f.Close()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		for _, e := range ents {
			if e.IsDir() {
				dirs = append(dirs, path.Join(dirs[i], e.Name()))
			}
		}
	}
	return dirs, errors.Join(errs...)
}

// readProcs reads the cgroup.procs of one group in the subtree; a group
// that is gone has no processes.
func (g *Group) readProcs(dir string) ([]int, error) {
	data, err := g.readFile(path.Join(dir, "cgroup.procs"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseProcs(data)
}

func (g *Group) procs() ([]int, error) {
	dirs, err := g.subtree()
	errs := []error{err}
	var pids []int
	for _, d := range dirs {
		ps, err := g.readProcs(d)
		errs = append(errs, err)
		pids = append(pids, ps...)
	}
	slices.Sort(pids)
	pids = slices.Compact(pids)
	if err := errors.Join(errs...); err != nil {
		return pids, fmt.Errorf("cgroup: procs %s: %w", g.path, err)
	}
	return pids, nil
}

func (g *Group) kill(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cgroup: kill %s: %w", g.path, err)
	}
	pids, err := g.procs()
	if err != nil {
		return fmt.Errorf("cgroup: kill %s: %w", g.path, err)
	}
	// Never the caller, nor an ancestor: killing the runner that started
	// the recoverer is as wrong as killing the recoverer.
	lineage, err := owner.Ancestors()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrContainsCaller, g.path, err)
	}
	for i, pid := range lineage {
		if !slices.Contains(pids, pid) {
			continue
		}
		if i == 0 {
			return fmt.Errorf("%w: %s (pid %d)", ErrContainsCaller, g.path, pid)
		}
		return fmt.Errorf("%w: %s holds pid %d, an ancestor of the caller (pid %d)", ErrContainsCaller, g.path, pid, os.Getpid())
	}
	err = g.writeFile(killFile, "1")
	if errors.Is(err, fs.ErrNotExist) {
		if g.gone() {
			return nil
		}
		err = g.freezeKill(ctx)
	}
	if err != nil {
		return fmt.Errorf("cgroup: kill %s: %w", g.path, err)
	}
	err = g.waitEvents(ctx, func(kv map[string]string) bool { return kv["populated"] == "0" })
	if err != nil && err != errGone {
		return fmt.Errorf("cgroup: kill %s: wait for populated 0: %w", g.path, err)
	}
	return nil
}

// freezeKill kills the subtree without cgroup.kill (before Linux 5.14):
// freeze it so that no member can fork or move, SIGKILL every member, thaw.
// A frozen task still dies of SIGKILL (cgroup-v2.rst, "Core Interface
// Files", cgroup.freeze).
func (g *Group) freezeKill(ctx context.Context) (err error) {
	if err := g.writeFile("cgroup.freeze", "1"); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("neither %s (Linux 5.14) nor cgroup.freeze (Linux 5.2): %w", killFile, errors.ErrUnsupported)
		}
		return err
	}
	defer func() {
		if terr := g.writeFile("cgroup.freeze", "0"); terr != nil && !errors.Is(terr, fs.ErrNotExist) {
			err = errors.Join(err, terr)
		}
	}()
	err = g.waitEvents(ctx, func(kv map[string]string) bool { return kv["frozen"] == "1" || kv["populated"] == "0" })
	if err == errGone {
		return nil
	}
	if err != nil {
		return fmt.Errorf("wait for frozen 1: %w", err)
	}
	dirs, err := g.subtree()
	errs := []error{err}
	for _, d := range dirs {
		errs = append(errs, g.killMembers(d))
	}
	return errors.Join(errs...)
}

// killMembers SIGKILLs the processes of one group of the subtree. Each
// member gets a pidfd first; cgroup.procs is read again afterwards and only
// pidfds whose PID is still listed are signalled, so a PID reused between
// the two reads is never signalled.
func (g *Group) killMembers(dir string) error {
	before, err := g.readProcs(dir)
	if err != nil {
		return err
	}
	pidfds := make(map[int]int, len(before))
	defer func() {
		for _, fd := range pidfds {
			unix.Close(fd)
		}
	}()
	var errs []error
	for _, pid := range before {
		fd, err := unix.PidfdOpen(pid, 0)
		if err == unix.ESRCH {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("pid %d: %w", pid, os.NewSyscallError("pidfd_open", err)))
			continue
		}
		pidfds[pid] = fd
	}
	after, err := g.readProcs(dir)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, pid := range after {
		fd, ok := pidfds[pid]
		if !ok {
			continue
		}
		if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && err != unix.ESRCH {
			errs = append(errs, fmt.Errorf("pid %d: %w", pid, os.NewSyscallError("pidfd_send_signal", err)))
		}
	}
	return errors.Join(errs...)
}

// waitEvents blocks until done holds for the group's cgroup.events. The
// kernel signals every change of that file as an inotify IN_MODIFY
// (kernfs_notify), so the file is read once after the watch is in place and
// again after each event: no change can be missed and nothing sleeps. The
// inotify descriptor is non-blocking and read through the runtime poller,
// so ctx interrupts the wait through a read deadline. It returns errGone
// when the group is removed.
func (g *Group) waitEvents(ctx context.Context, done func(map[string]string) bool) error {
	ifd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return os.NewSyscallError("inotify_init1", err)
	}
	in := os.NewFile(uintptr(ifd), "inotify")
	defer in.Close()
	// The watch goes through the directory descriptor's /proc link, not
	// the path: if the group was removed and the name reused, a watch by
	// path would follow the newcomer.
	events := fmt.Sprintf("/proc/self/fd/%d/cgroup.events", g.fd)
	if _, err := unix.InotifyAddWatch(ifd, events, unix.IN_MODIFY); err != nil {
		if err == unix.ENOENT && g.gone() {
			return errGone
		}
		return &fs.PathError{Op: "inotify_add_watch", Path: filepath.Join(g.path, "cgroup.events"), Err: err}
	}
	stop := context.AfterFunc(ctx, func() { in.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, 4096)
	for {
		kv, err := g.readEvents()
		if err != nil {
			return err
		}
		if done(kv) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// Each read returns at least one event; which one does not matter:
		// IN_MODIFY means re-read, IN_IGNORED means the file is gone and
		// the re-read reports it.
		if _, err := in.Read(buf); err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			return fmt.Errorf("read inotify: %w", err)
		}
	}
}

func (g *Group) remove() error {
	dirs, err := g.subtree()
	errs := []error{err}
	// Breadth-first order reversed puts every group after all of its
	// descendants: rmdir(2) of a cgroup with child cgroups fails (EBUSY).
	for i := len(dirs) - 1; i > 0; i-- {
		err := ignoringEINTR(func() error { return unix.Unlinkat(g.fd, dirs[i], unix.AT_REMOVEDIR) })
		if err != nil && err != unix.ENOENT {
			errs = append(errs, &fs.PathError{Op: "rmdir", Path: filepath.Join(g.path, dirs[i]), Err: err})
		}
	}
	errs = append(errs, g.removeSelf())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cgroup: remove %s: %w", g.path, err)
	}
	return nil
}

// removeSelf removes the group's own directory through its parent's
// descriptor, after checking that the name still refers to the directory
// this Group holds open: if the group was removed and another created under
// the same name, that other group is left alone.
func (g *Group) removeSelf() error {
	if g.gone() {
		return nil
	}
	parent, err := openat(g.fd, "..", unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return &fs.PathError{Op: "open", Path: filepath.Dir(g.path), Err: err}
	}
	defer unix.Close(parent)
	var self, named unix.Stat_t
	if err := unix.Fstat(g.fd, &self); err != nil {
		return &fs.PathError{Op: "fstat", Path: g.path, Err: err}
	}
	base := filepath.Base(g.path)
	err = ignoringEINTR(func() error { return unix.Fstatat(parent, base, &named, unix.AT_SYMLINK_NOFOLLOW) })
	if err != nil && err != unix.ENOENT {
		return &fs.PathError{Op: "fstatat", Path: g.path, Err: err}
	}
	if err == unix.ENOENT || named.Dev != self.Dev || named.Ino != self.Ino {
		if g.gone() {
			return nil
		}
		return fmt.Errorf("%s no longer names this group", g.path)
	}
	err = ignoringEINTR(func() error { return unix.Unlinkat(parent, base, unix.AT_REMOVEDIR) })
	if err != nil && err != unix.ENOENT {
		return &fs.PathError{Op: "rmdir", Path: g.path, Err: err}
	}
	return nil
}
