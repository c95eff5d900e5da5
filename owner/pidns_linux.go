package owner

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// pidNSInitIno is PROC_PID_INIT_INO (include/linux/proc_ns.h): the inode
// of the initial PID namespace, fixed since Linux 3.8. Every other PID
// namespace descends from it, so a recoverer in it sees them all.
const pidNSInitIno = 0xEFFFFFFC

// maxNSDepth bounds a walk up the PID namespace tree: the kernel nests at
// most 32 levels (MAX_PID_NS_LEVEL).
const maxNSDepth = 32

// selfPIDNSOnce reads the caller's PID namespace, which never changes for a
// process (setns(2) and unshare(2) change only the namespace of its future
// children). It reads the real /proc, not procRoot: fixtures replace
// process entries, not the caller. It also refuses a /proc that belongs to
// another PID namespace than the caller's (a container that kept the
// host's procfs): every PID read there would name another process.
var selfPIDNSOnce = sync.OnceValues(func() (uint64, error) {
	self, err := os.Readlink("/proc/self")
	if err != nil {
		return 0, fmt.Errorf("owner: /proc/self: %w", err)
	}
	if self != strconv.Itoa(os.Getpid()) {
		return 0, fmt.Errorf("owner: /proc belongs to another PID namespace (it calls this process %s, the kernel %d): mount a procfs of this namespace", self, os.Getpid())
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return 0, fmt.Errorf("owner: PID namespace: %w", os.NewSyscallError("stat /proc/self/ns/pid", err))
	}
	return st.Ino, nil
})

func selfPIDNS() (uint64, error) { return selfPIDNSOnce() }

// nsView is one read of the PID namespace of every process visible here.
type nsView struct {
	self uint64
	byNS map[uint64][]int // namespace inode → local PIDs of its own members
	// hidden lists processes whose namespace link could not be read
	// (ptrace access is required: another user's process, for a recoverer
	// that is not root).
	hidden []int
}

func readNSView(self uint64) (*nsView, error) {
	d, err := os.Open(procRoot)
	if err != nil {
		return nil, fmt.Errorf("owner: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("owner: %w", err)
	}
	v := &nsView{self: self, byNS: map[uint64][]int{}}
	var buf [64]byte
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 {
			continue
		}
		k, err := unix.Readlink(procRoot+"/"+n+"/ns/pid", buf[:])
		switch {
		case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH):
			continue // exited, or a zombie: no namespace any more
		case err != nil:
			v.hidden = append(v.hidden, pid)
			continue
		}
		ns, ok := parseNSLink(buf[:k])
		if !ok {
			v.hidden = append(v.hidden, pid)
			continue
		}
		v.byNS[ns] = append(v.byNS[ns], pid)
	}
	return v, nil
}

// subtree returns the local PIDs of the processes inside namespace ns (its
// own members and those of the namespaces below it) and the index of ns in
// their NSpid lines. ok is false when no process of ns is visible.
func (v *nsView) subtree(ns uint64) (pids []int, depth int, ok bool) {
	depth = -1
	for _, pid := range v.byNS[ns] {
		if st, ok := readNSStatus(pid); ok {
			depth = len(st.nspid) - 1
			break
		}
	}
	if depth < 0 {
		return nil, 0, false
	}
	pids = append(pids, v.byNS[ns]...)
	for n, members := range v.byNS {
		if n == ns || n == v.self {
			continue
		}
		switch below(members, ns, v.self) {
		case belowYes:
			pids = append(pids, members...)
		case belowUnknown:
			v.hidden = append(v.hidden, members...)
		}
	}
	return pids, depth, true
}

const (
	belowNo = iota
	belowYes
	belowUnknown
)

// below tells whether the namespace of members lies below ns, walking up
// with NS_GET_PARENT (ioctl_ns(2), Linux 4.9) from one member's namespace.
func below(members []int, ns, self uint64) int {
	for _, pid := range members {
		fd, err := unix.Open(procRoot+"/"+strconv.Itoa(pid)+"/ns/pid", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		return walkUp(fd, ns, self)
	}
	return belowUnknown
}

// walkUp closes fd.
func walkUp(fd int, ns, self uint64) int {
	defer func() { unix.Close(fd) }()
	for range maxNSDepth {
		parent, err := unix.IoctlRetInt(fd, unix.NS_GET_PARENT)
		if err != nil {
			// EPERM: the parent is outside our own namespace's
			// scope, so ns (which we see) is not above it.
			return belowNo
		}
		unix.Close(fd)
		fd = parent
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return belowUnknown
		}
		switch st.Ino {
		case ns:
			return belowYes
		case self:
			return belowNo
		}
	}
	return belowUnknown
}

// readNSStatus reads /proc/PID/status (readable by every user).
func readNSStatus(pid int) (nsStatus, bool) {
	b, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nsStatus{}, false
	}
	return parseNSStatus(b)
}

// hiddenMay reports whether a process whose namespace could not be read
// may be the one looked for: match says so from its status (depth < 0: it
// lives in any namespace but the reader's). An unreadable status may be
// anything.
func (v *nsView) hiddenMay(match func(nsStatus) bool) bool {
	for _, pid := range v.hidden {
		st, ok := readNSStatus(pid)
		if !ok || match(st) {
			return true
		}
	}
	return false
}

// nsGone reports whether namespace ns, of which no process is visible, is
// known to be empty: only a recoverer in the initial namespace sees every
// namespace, and then only if no process it could not read is outside its
// own namespace. A PID namespace whose init has exited can gain no process,
// and every process below it was killed with it (pid_namespaces(7)).
func (v *nsView) nsGone() bool {
	return v.self == pidNSInitIno && !v.hiddenMay(func(st nsStatus) bool { return len(st.nspid) > 1 })
}

func checkForeign(id Identity, self uint64) (Verdict, procInfo) {
	what := fmt.Sprintf("pid %d of PID namespace %d", id.PID, id.PIDNS)
	v, err := readNSView(self)
	if err != nil {
		return Verdict{Unknown, err.Error()}, procInfo{}
	}
	pids, depth, ok := v.subtree(id.PIDNS)
	if !ok {
		if v.nsGone() {
			return Verdict{Dead, what + ": no process of that namespace is left"}, procInfo{}
		}
		return Verdict{Unknown, fmt.Sprintf("%s: that namespace is not visible from PID namespace %d", what, self)}, procInfo{}
	}
	var cands []int
	for _, pid := range pids {
		if st, ok := readNSStatus(pid); ok && at(st.nspid, depth) == id.PID {
			cands = append(cands, pid)
		}
	}
	if len(cands) > 1 {
		// A PID names one process per namespace at a time: more than one
		// means the reads raced a PID's reuse. Keep those that started
		// when the recorded process did.
		var same []int
		for _, pid := range cands {
			if info, err := readProc(pid); err == nil && info.startTime == id.StartTime {
				same = append(same, pid)
			}
		}
		if len(same) != 1 {
			return Verdict{Unknown, fmt.Sprintf("%s matches %d processes here", what, len(cands))}, procInfo{}
		}
		cands = same
	}
	if len(cands) == 0 {
		if v.hiddenMay(func(st nsStatus) bool { return at(st.nspid, depth) == id.PID }) {
			return Verdict{Unknown, fmt.Sprintf("%s: not found, but a process whose namespace cannot be read may be it", what)}, procInfo{}
		}
		return Verdict{Dead, what + " not running"}, procInfo{}
	}
	info, err := readProc(cands[0])
	return judge(id, cands[0], fmt.Sprintf("%s (pid %d here)", what, cands[0]), info, err)
}

func groupAliveForeign(ns uint64, pgid int, self uint64) (bool, error) {
	v, err := readNSView(self)
	if err != nil {
		return false, err
	}
	pids, depth, ok := v.subtree(ns)
	if !ok {
		if v.nsGone() {
			return false, nil
		}
		return false, fmt.Errorf("owner: process group %d of PID namespace %d: that namespace is not visible from PID namespace %d: %w", pgid, ns, self, ErrUnverifiable)
	}
	member := func(st nsStatus) bool { return at(st.nspgid, depth) == pgid && !st.zombie() }
	for _, pid := range pids {
		if st, ok := readNSStatus(pid); ok && member(st) {
			return true, nil
		}
	}
	if v.hiddenMay(member) {
		return false, fmt.Errorf("owner: process group %d of PID namespace %d: a process whose namespace cannot be read may belong to it: %w", pgid, ns, ErrUnverifiable)
	}
	return false, nil
}

func liveElsewhere(pid int, start uint64) (bool, error) {
	self, err := selfPIDNS()
	if err != nil {
		return false, fmt.Errorf("%w: %w", err, ErrUnverifiable)
	}
	v, err := readNSView(self)
	if err != nil {
		return false, err
	}
	for ns, members := range v.byNS {
		if ns == self {
			continue
		}
		for _, local := range members {
			st, ok := readNSStatus(local)
			if !ok || len(st.nspid) < 2 || st.nspid[len(st.nspid)-1] != pid || st.zombie() {
				continue
			}
			if info, err := readProc(local); err == nil && info.startTime == start && !info.zombie {
				return true, nil
			}
		}
	}
	return false, nil
}
