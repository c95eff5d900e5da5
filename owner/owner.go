package owner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/ownerjournal/ownerjournal/internal/errs"
)

// Sentinel errors. Callers branch on them with [errors.Is].
var (
	// ErrGone means the process named by an identity is not running any
	// more: it exited, is a zombie, or its PID now belongs to another
	// process.
	ErrGone = errors.New("owner: process gone")
	// ErrUnverifiable means the identity can be neither confirmed nor ruled
	// out (another host, permission denied, unreadable process entry).
	ErrUnverifiable = errors.New("owner: identity cannot be verified")
	// ErrRefused means the target is the calling process or one of its
	// ancestors; recovery never signals those.
	ErrRefused = errors.New("owner: refusing to signal self or an ancestor")
)

// Identity names one process instance. Two identities are the same process
// only if every field matches.
type Identity struct {
	PID int `json:"pid"`
	// StartTime is the process start time in the platform's unit: clock
	// ticks since boot on Linux (field 22 of /proc/PID/stat), microseconds
	// since the epoch on darwin.
	StartTime uint64 `json:"start_time"`
	BootID    string `json:"boot_id"`
	UID       int    `json:"uid"`
	Host      string `json:"host"`
	// PIDNS is the inode of the PID namespace PID is a number in (the
	// writer's /proc/self/ns/pid, Linux 3.8). Zero means "not recorded"
	// (darwin has no PID namespaces; records written before the field
	// existed): the PID is then read in the checker's own namespace.
	PIDNS uint64 `json:"pid_ns,omitempty"`
}

// String formats the identity for messages.
func (id Identity) String() string {
	return fmt.Sprintf("pid %d (start %d, uid %d, host %s)", id.PID, id.StartTime, id.UID, id.Host)
}

// State is the outcome of a liveness check.
type State int

const (
	// Unknown: the process can be neither confirmed nor ruled out.
	Unknown State = iota
	// Alive: a running process matches the identity in every field.
	Alive
	// Dead: no running process matches the identity.
	Dead
)

func (s State) String() string {
	switch s {
	case Alive:
		return "alive"
	case Dead:
		return "dead"
	default:
		return "unknown"
	}
}

// Verdict is a State with the reason it was reached.
type Verdict struct {
	State  State
	Reason string
}

func (v Verdict) String() string { return v.State.String() + ": " + v.Reason }

// procInfo is what the platform code reads about one PID.
type procInfo struct {
	startTime uint64
	uid       int
	ppid      int
	pgid      int
	zombie    bool
	// pid is the process's PID in the caller's namespace: the recorded
	// PID, or its translation from the recorded namespace.
	pid int
}

var hostOnce = sync.OnceValues(os.Hostname)

// BootID returns the current boot's id (/proc/sys/kernel/random/boot_id on
// Linux, kern.bootsessionuuid on darwin), read once.
func BootID() (string, error) { return bootID() }

// Self returns the identity of the calling process.
func Self() (Identity, error) { return Of(os.Getpid()) }

// Of returns the current identity of the process with the given PID. It
// returns an error wrapping [ErrGone] if no such process runs (zombies
// included) and [ErrUnverifiable] if it cannot be read.
func Of(pid int) (Identity, error) {
	if pid <= 0 {
		return Identity{}, errs.Wrapf(ErrGone, "owner: invalid pid %d", pid)
	}
	boot, err := bootID()
	if err != nil {
		return Identity{}, err
	}
	host, err := hostOnce()
	if err != nil {
		return Identity{}, fmt.Errorf("owner: host name: %w", err)
	}
	ns, err := selfPIDNS()
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %w", err, ErrUnverifiable)
	}
	info, err := readProc(pid)
	if err != nil {
		return Identity{}, err
	}
	if info.zombie {
		return Identity{}, errs.Wrapf(ErrGone, "owner: pid %d is a zombie", pid)
	}
	return Identity{PID: pid, StartTime: info.startTime, BootID: boot, UID: info.uid, Host: host, PIDNS: ns}, nil
}

// Check tells whether the process named by id is running. It never signals
// and never returns Alive for a process whose start time, boot id, UID or
// host differs from id. An identity with a field missing ([Identity.Complete])
// is Unknown, never Dead: a missing field proves nothing.
//
// An identity recorded in another PID namespace (id.PIDNS) is judged in
// that namespace: from an ancestor namespace its PID is translated through
// the NSpid line of /proc/PID/status of the processes in the recorded
// namespace (and below it), and only a unique match is believed. A
// namespace that cannot be seen from here (an ancestor or a sibling of
// ours, or one whose processes cannot be read) is Unknown, never Dead.
func Check(id Identity) Verdict {
	v, _ := check(id)
	return v
}

// check returns the verdict and, when alive, what was read about the process.
func check(id Identity) (Verdict, procInfo) {
	if err := id.Complete(); err != nil {
		return Verdict{Unknown, err.Error()}, procInfo{}
	}
	host, err := hostOnce()
	if err != nil {
		return Verdict{Unknown, "host name: " + err.Error()}, procInfo{}
	}
	if id.Host != host {
		return Verdict{Unknown, fmt.Sprintf("recorded on host %q, this is %q", id.Host, host)}, procInfo{}
	}
	boot, err := bootID()
	if err != nil {
		return Verdict{Unknown, err.Error()}, procInfo{}
	}
	if id.BootID != boot {
		return Verdict{Dead, fmt.Sprintf("recorded in an earlier boot (%s)", id.BootID)}, procInfo{}
	}
	if id.PIDNS != 0 {
		self, err := selfPIDNS()
		if err != nil {
			return Verdict{Unknown, err.Error()}, procInfo{}
		}
		if id.PIDNS != self {
			return checkForeign(id, self)
		}
	}
	info, err := readProc(id.PID)
	return judge(id, id.PID, fmt.Sprintf("pid %d", id.PID), info, err)
}

// judge compares what was read about the process at local PID pid (named
// what in reasons) with id.
func judge(id Identity, pid int, what string, info procInfo, err error) (Verdict, procInfo) {
	info.pid = pid
	switch {
	case errors.Is(err, ErrGone):
		return Verdict{Dead, what + " not running"}, procInfo{}
	case err != nil:
		return Verdict{Unknown, err.Error()}, procInfo{}
	case info.startTime != id.StartTime:
		return Verdict{Dead, fmt.Sprintf("%s reused (start time %d, recorded %d)", what, info.startTime, id.StartTime)}, procInfo{}
	case info.zombie:
		return Verdict{Dead, what + " is a zombie"}, procInfo{}
	case info.uid != id.UID:
		// Same PID and start time but another UID: either a setuid change
		// or a forged record. Neither may be acted on.
		return Verdict{Unknown, fmt.Sprintf("%s runs as uid %d, recorded %d", what, info.uid, id.UID)}, procInfo{}
	}
	return Verdict{Alive, what + " running"}, info
}

// verify returns nil if id is alive, or an error wrapping ErrGone or
// ErrUnverifiable with the verdict's reason.
func verify(id Identity) (procInfo, error) {
	v, info := check(id)
	switch v.State {
	case Alive:
		return info, nil
	case Dead:
		return info, errs.Wrapf(ErrGone, "owner: %s", v.Reason)
	default:
		// Keep the cause branchable (EMFILE passes, EACCES does not):
		// the verdict holds it only as text.
		if _, err := readProc(id.PID); err != nil && !errors.Is(err, ErrGone) {
			return info, err
		}
		return info, errs.Wrapf(ErrUnverifiable, "owner: %s", v.Reason)
	}
}

// refuseSelfOrAncestor returns ErrRefused if pid is the caller or one of its
// ancestors.
func refuseSelfOrAncestor(pid int) error {
	for p, hops := os.Getpid(), 0; p > 0 && hops < 4096; hops++ {
		if p == pid {
			return errs.Wrapf(ErrRefused, "owner: pid %d", pid)
		}
		info, err := readProc(p)
		if err != nil {
			return nil
		}
		if info.ppid == p {
			return nil
		}
		p = info.ppid
	}
	return nil
}

// Process is a verified handle on one running process. Signals sent through
// it reach that process or nobody (see the platform notes on [Process.Signal]).
// A Process is safe for concurrent use; Close it when done.
type Process struct {
	id Identity
	h  handle
}

// Open verifies id and returns a handle on the process. The handle is
// obtained before the identity is verified, so PID reuse between the two
// cannot redirect it. It returns an error wrapping [ErrGone] if the process is
// not running (or the PID is reused), [ErrUnverifiable] if it cannot be
// verified, and [ErrRefused] for the caller and its ancestors.
//
// An identity recorded in another PID namespace is first translated (see
// [Check]); the handle is then opened on the translated PID and verified
// again, so the process it reaches is the one the unique match named.
func Open(id Identity) (*Process, error) {
	if err := id.Complete(); err != nil {
		return nil, fmt.Errorf("%w: %w", err, ErrUnverifiable)
	}
	id, err := local(id)
	if err != nil {
		return nil, err
	}
	if err := refuseSelfOrAncestor(id.PID); err != nil {
		return nil, err
	}
	h, err := openHandle(id)
	if err != nil {
		return nil, err
	}
	return &Process{id: id, h: h}, nil
}

// local returns id as seen from the caller's PID namespace: id itself when
// it was recorded here (or without a namespace), else its verified
// translation (PID and PIDNS of this namespace).
func local(id Identity) (Identity, error) {
	if id.PIDNS == 0 {
		return id, nil
	}
	self, err := selfPIDNS()
	if err != nil {
		return id, fmt.Errorf("%w: %w", err, ErrUnverifiable)
	}
	if id.PIDNS == self {
		return id, nil
	}
	info, err := verify(id)
	if err != nil {
		return id, err
	}
	id.PID, id.PIDNS = info.pid, self
	return id, nil
}

// Identity returns the verified identity the handle was opened for, as
// seen from the caller's PID namespace: an identity recorded in another
// namespace comes back with its translated PID and this namespace.
func (p *Process) Identity() Identity { return p.id }

// Signal sends sig to the process. It returns an error wrapping [ErrGone] if
// the process has exited. On Linux the signal goes through the pidfd
// (pidfd_send_signal(2)) and cannot reach another process. On darwin the
// identity is verified again immediately before kill(2); a PID reused in the
// microseconds between the two is the remaining window.
func (p *Process) Signal(sig syscall.Signal) error { return p.h.signal(p.id, sig, false) }

// SignalGroup sends sig to the process group the process leads. On Linux this
// uses PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9+), which reaches the group even
// after the leader has exited, as long as the handle was opened while the
// leader lived. A handle on a process that does not lead a group gets an
// error wrapping [ErrGone] from the kernel (ESRCH). A group that holds the
// caller or any of its ancestors is refused with [ErrRefused]: signalling it
// would signal them. (Signal 0, a probe that delivers nothing, is not.)
func (p *Process) SignalGroup(sig syscall.Signal) error {
	if p.id.PID == getpgrp() {
		return errs.Wrapf(ErrRefused, "owner: process group %d is the caller's own", p.id.PID)
	}
	if sig != 0 {
		if err := refuseGroupOfAncestor(p.id.PID); err != nil {
			return err
		}
	}
	return p.h.signal(p.id, sig, true)
}

// Wait blocks until the process has exited (a zombie counts as exited) or ctx
// is done. It does not reap the process.
func (p *Process) Wait(ctx context.Context) error { return p.h.wait(ctx) }

// Exited reports whether the process has exited, without blocking.
func (p *Process) Exited() bool { return p.h.exited() }

// Close releases the handle. It does not affect the process.
func (p *Process) Close() error { return p.h.close() }

// GroupAlive reports whether any process that is not a zombie belongs to
// process group pgid. It reads every process's state, so it is meant for
// confirming that a group is empty, not for hot paths. A pgid below 2 is
// no group that may be probed (kill(-1, 0) would address every process):
// it returns an error wrapping [ErrUnverifiable].
func GroupAlive(pgid int) (bool, error) {
	if pgid <= 1 {
		return false, fmt.Errorf("owner: process group %d cannot be probed: %w", pgid, ErrUnverifiable)
	}
	return groupAlive(pgid)
}

// GroupAliveOf is [GroupAlive] for the process group led by leader, whose
// PID (and so the group's id) is a number in leader.PIDNS. A group in
// another PID namespace is read through the NSpgid lines of its members;
// one in a namespace not visible from here is an error wrapping
// [ErrUnverifiable].
func GroupAliveOf(leader Identity) (bool, error) {
	if leader.PIDNS != 0 {
		self, err := selfPIDNS()
		if err != nil {
			return false, fmt.Errorf("%w: %w", err, ErrUnverifiable)
		}
		if leader.PIDNS != self {
			return groupAliveForeign(leader.PIDNS, leader.PID, self)
		}
	}
	return GroupAlive(leader.PID)
}

// LiveElsewhere reports whether a live process that a PID namespace below
// the caller's calls pid started at start (clock ticks since boot). It is
// for a writer known only by PID and start time (a temp file's name), whose
// namespace was not recorded: a container's writer may be alive although
// this namespace's pid names another process or none. Namespaces above or
// beside the caller's cannot be seen. It reads every process's status, so
// it is meant for the rare leftover, not for hot paths.
func LiveElsewhere(pid int, start uint64) (bool, error) { return liveElsewhere(pid, start) }

// GroupOf returns the process group id of pid.
func GroupOf(pid int) (int, error) {
	info, err := readProc(pid)
	if err != nil {
		return 0, err
	}
	return info.pgid, nil
}

// ParentOf returns the parent PID of pid.
func ParentOf(pid int) (int, error) {
	info, err := readProc(pid)
	if err != nil {
		return 0, err
	}
	return info.ppid, nil
}
