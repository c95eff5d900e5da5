package cgroup

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Sentinel errors. Callers branch on them with [errors.Is].
var (
	// ErrUnavailable means no cgroup v2 hierarchy is usable here: none is
	// mounted, the caller may not create groups in it, or the system has no
	// cgroups at all. The wrapping error says which.
	ErrUnavailable = errors.New("cgroup: cgroup v2 unavailable")
	// ErrNotGroup means a path given to [OpenGroup] does not name a group:
	// it is relative, contains "..", lies outside every cgroup2 mount, is the
	// root of the hierarchy, or is not a directory on a cgroup2 filesystem.
	ErrNotGroup = errors.New("cgroup: not a cgroup v2 group")
	// ErrContainsCaller means [Group.Kill] refused a group that contains the
	// calling process or one of its ancestors (or whose check could not
	// read the caller's ancestry).
	ErrContainsCaller = errors.New("cgroup: group contains the calling process or an ancestor")
	// ErrReplaced means the group at a recorded path is not the recorded
	// one: its cgroup id differs (the group was removed and another made
	// under the same name).
	ErrReplaced = errors.New("cgroup: group at the recorded path is another one")
)

// Test seams: where the caller's mounts and cgroup membership are read.
var (
	mountinfoPath  = "/proc/self/mountinfo"
	procSelfCgroup = "/proc/self/cgroup"
	// killFile is the kill switch; tests rename it to exercise the freeze
	// fallback used before Linux 5.14.
	killFile = "cgroup.kill"
)

// Hierarchy is a mounted cgroup v2 filesystem and the directory under which
// the caller may create groups. The zero value is unusable; get one from
// [Detect].
type Hierarchy struct {
	// Mount is the mount point of the cgroup2 filesystem: /sys/fs/cgroup on
	// a pure cgroup v2 system, /sys/fs/cgroup/unified in hybrid mode.
	Mount string
	// Parent is the directory [Hierarchy.Create] makes groups in: the
	// caller's own cgroup when the caller may write there (a delegated
	// subtree, or root), otherwise, for root, Mount.
	Parent string
}

// Detect finds a cgroup v2 hierarchy in which the caller may create groups.
// It reads /proc/self/mountinfo for cgroup2 mounts (preferring
// /sys/fs/cgroup, then /sys/fs/cgroup/unified) and /proc/self/cgroup for the
// caller's own cgroup (the "0::" line). The caller's own cgroup is the
// parent when its directory and cgroup.procs are writable, which is what
// delegation grants and what clone3(CLONE_INTO_CGROUP) needs (the writer
// must be allowed to write cgroup.procs of the common ancestor of source and
// destination). Otherwise, when running as root, the mount root is the
// parent if it is writable.
//
// Detect creates nothing. It returns an error wrapping [ErrUnavailable] that
// states every reason when no hierarchy is usable.
func Detect() (Hierarchy, error) { return detect() }

// Create makes a new, empty group named name in h.Parent and opens it. An
// empty name picks a unique one, "oj-PID-RANDOM". A name must be 1 to 128
// characters from [A-Za-z0-9_.-], not starting with "." or "-", and must not
// start with "cgroup." (the kernel's interface files). An existing group of
// that name is an error wrapping [fs.ErrExist].
//
// The caller owns the group: end it with [Group.Kill], [Group.Remove] and
// [Group.Close].
func (h Hierarchy) Create(name string) (*Group, error) {
	if name == "" {
		name = randomName()
	}
	if err := validName(name); err != nil {
		return nil, err
	}
	return h.create(name)
}

// OpenGroup opens an existing group by absolute path, for a recoverer that
// found the path in a record. The path must not contain "..", must lie
// strictly inside a cgroup2 mount listed in /proc/self/mountinfo, and must
// be a directory on a cgroup2 filesystem (checked with fstatfs(2) on the
// opened directory, not on the path); otherwise the error wraps
// [ErrNotGroup]. A path that does not exist returns an error wrapping
// [fs.ErrNotExist]: the group was removed already, which recovery counts as
// progress.
func OpenGroup(path string) (*Group, error) { return openGroup(path) }

// OpenRecorded opens the group a record names by path and cgroup id ([Group.ID]
// when the group was created). It checks what [OpenGroup] checks, and also
// that the group's parent is a base the caller may create groups in (a
// delegated subtree, or any group for root: what [Detect] requires of a
// parent) and that the opened group's id is id; otherwise the error wraps
// [ErrNotGroup] or [ErrReplaced]. The id is compared on the opened
// descriptor, which every later operation goes through. A path that does
// not exist returns an error wrapping [fs.ErrNotExist].
func OpenRecorded(path string, id uint64) (*Group, error) { return openRecorded(path, id) }

// Group is an open cgroup v2 group: a directory on a cgroup2 filesystem held
// open by file descriptor, so that control files are reached through the
// descriptor rather than by path.
//
// A Group is safe for concurrent use. [Group.Close] waits for calls in
// progress.
type Group struct {
	path string

	mu   sync.RWMutex
	fd   int  // O_RDONLY|O_DIRECTORY|O_CLOEXEC; valid while open
	open bool // false for the zero value and after Close
}

// Path returns the group's absolute directory, for example
// /sys/fs/cgroup/unified/oj-4242-1f2e3d4c5b6a7988. It is what a record
// stores and what [OpenGroup] accepts.
func (g *Group) Path() string { return g.path }

// FD returns the group directory's file descriptor, for
// syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: g.FD()}: clone3(2) with
// CLONE_INTO_CGROUP (Linux 5.7) then places the child in the group before it
// runs. The descriptor is close-on-exec and stays valid until [Group.Close];
// FD returns -1 after Close.
func (g *Group) FD() int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if !g.open {
		return -1
	}
	return g.fd
}

// ID returns the group's cgroup id: the inode number of its directory on the
// cgroup2 filesystem, which on 64-bit systems is the id the kernel gives the
// group (kernfs node id, Linux 5.5; what name_to_handle_at(2) encodes and
// bpf_get_current_cgroup_id reports). A group removed and made again under
// the same name has another id.
func (g *Group) ID() (uint64, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if !g.open {
		return 0, g.closedErr("id")
	}
	return g.id()
}

// Kill ends every process in the group and in its descendant groups and
// returns once the kernel reports the group unpopulated (cgroup.events
// "populated 0"). It writes "1" to cgroup.kill (Linux 5.14). On older
// kernels it freezes the group (cgroup.freeze, Linux 5.2), SIGKILLs each
// member through a pidfd that is re-checked against cgroup.procs after it is
// opened, and thaws the group. The wait uses inotify on cgroup.events.
//
// Kill returns [ErrContainsCaller] for a group that contains the calling
// process or one of its ancestors, and ctx's error if ctx ends first (the SIGKILLs are sent by
// then; only the confirmation is missing). A group removed meanwhile is
// empty: Kill returns nil. Killed members are not reaped: their parent
// (usually a subreaper or init) does that.
func (g *Group) Kill(ctx context.Context) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if !g.open {
		return g.closedErr("kill")
	}
	return g.kill(ctx)
}

// Remove removes the group's directory and every descendant group,
// deepest-first. It attempts every directory even after a failure and
// returns all failures joined; a directory that is already gone counts as
// removed. A group that still has members fails with EBUSY: call
// [Group.Kill] first. Remove does not close the Group.
func (g *Group) Remove() error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if !g.open {
		return g.closedErr("remove")
	}
	return g.remove()
}

// Procs returns the PIDs of the processes in the group and its descendant
// groups, sorted, as seen in the caller's PID namespace. It is a snapshot:
// never signal a PID from it (a PID may be reused as soon as its process is
// reaped); use [Group.Kill]. A group that is gone has no processes.
func (g *Group) Procs() ([]int, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if !g.open {
		return nil, g.closedErr("procs")
	}
	return g.procs()
}

// Populated reports whether the group or any descendant group has a live
// process (cgroup.events "populated"). A group that is gone is not
// populated.
func (g *Group) Populated() (bool, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if !g.open {
		return false, g.closedErr("populated")
	}
	return g.populated()
}

// Close releases the directory descriptor; it neither kills nor removes the
// group. It waits for calls in progress and is idempotent.
func (g *Group) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.open {
		return nil
	}
	g.open = false
	return g.close()
}

func (g *Group) closedErr(op string) error {
	return fmt.Errorf("cgroup: %s %s: %w", op, g.path, os.ErrClosed)
}

// randomName returns "oj-PID-RANDOM" with 64 random bits.
func randomName() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error (Go 1.24)
	return "oj-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

func validName(name string) error {
	bad := func(why string) error { return fmt.Errorf("cgroup: invalid group name %q: %s", name, why) }
	if len(name) == 0 || len(name) > 128 {
		return bad("length must be 1 to 128")
	}
	if name[0] == '.' || name[0] == '-' {
		return bad(`starts with "." or "-"`)
	}
	if strings.HasPrefix(name, "cgroup.") {
		return bad(`starts with "cgroup."`)
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return bad("only [A-Za-z0-9_.-] allowed")
		}
	}
	return nil
}

// mount is one line of /proc/self/mountinfo (proc(5)).
type mount struct {
	root   string // the mounted directory within the filesystem (field 4)
	point  string // the mount point (field 5)
	fstype string
}

// parseMountinfo parses /proc/PID/mountinfo. Fields are separated by single
// spaces; optional fields end at a lone "-", followed by the filesystem
// type. Paths escape space, tab, newline and backslash as \ooo. Lines it
// cannot parse are skipped: the kernel writes this file, and one unknown
// line must not hide the others.
func parseMountinfo(data []byte) []mount {
	var ms []mount
	for line := range strings.SplitSeq(string(data), "\n") {
		fields := strings.Fields(line)
		sep := slices.Index(fields, "-")
		if sep < 6 || sep+1 >= len(fields) {
			continue
		}
		ms = append(ms, mount{
			root:   unescapeOctal(fields[3]),
			point:  unescapeOctal(fields[4]),
			fstype: fields[sep+1],
		})
	}
	return ms
}

// unescapeOctal undoes the kernel's \ooo escaping (seq_escape).
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && '0' <= s[i+1] && s[i+1] <= '3' && isOctal(s[i+2]) && isOctal(s[i+3]) {
			v := (s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0')
			b.WriteByte(v)
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return '0' <= c && c <= '7' }

// parseSelfCgroup returns the cgroup v2 path from /proc/PID/cgroup, the
// "0::PATH" line (cgroups(7)). ok is false when there is none (a cgroup v1
// only system).
func parseSelfCgroup(data []byte) (path string, ok bool) {
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, found := strings.CutPrefix(line, "0::"); found {
			return rest, true
		}
	}
	return "", false
}

// parseEvents parses a cgroup.events file: one "key value" pair per line.
func parseEvents(data []byte) (map[string]string, error) {
	kv := make(map[string]string)
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		k, v, ok := bytes.Cut(line, []byte(" "))
		if !ok || len(k) == 0 {
			return nil, fmt.Errorf("cgroup: malformed cgroup.events line %q", line)
		}
		kv[string(k)] = string(v)
	}
	if _, ok := kv["populated"]; !ok {
		return nil, errors.New(`cgroup: cgroup.events has no "populated" key`)
	}
	return kv, nil
}

// parseProcs parses a cgroup.procs file: one decimal PID per line.
func parseProcs(data []byte) ([]int, error) {
	var pids []int
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		pid, err := strconv.Atoi(string(line))
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("cgroup: malformed cgroup.procs line %q", line)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// reasons joins why each candidate was unusable into one message, keeping
// every cause reachable through errors.Is.
type reasons []error

func (r reasons) Error() string {
	msgs := make([]string, len(r))
	for i, err := range r {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (r reasons) Unwrap() []error { return r }
