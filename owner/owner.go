package owner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
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
}

var hostOnce = sync.OnceValues(os.Hostname)

// Self returns the identity of the calling process.
func Self() (Identity, error) { return Of(os.Getpid()) }

// Of returns the current identity of the process with the given PID. It
// returns an error wrapping [ErrGone] if no such process runs (zombies
// included) and [ErrUnverifiable] if it cannot be read.
func Of(pid int) (Identity, error) {
	if pid <= 0 {
		return Identity{}, fmt.Errorf("owner: invalid pid %d: %w", pid, ErrGone)
	}
	boot, err := bootID()
	if err != nil {
		return Identity{}, err
	}
	host, err := hostOnce()
	if err != nil {
		return Identity{}, fmt.Errorf("owner: host name: %w", err)
	}
	info, err := readProc(pid)
	if err != nil {
		return Identity{}, err
	}
	if info.zombie {
		return Identity{}, fmt.Errorf("owner: pid %d is a zombie: %w", pid, ErrGone)
	}
	return Identity{PID: pid, StartTime: info.startTime, BootID: boot, UID: info.uid, Host: host}, nil
}

// Check tells whether the process named by id is running. It never signals
// and never returns Alive for a process whose start time, boot id, UID or
// host differs from id.
func Check(id Identity) Verdict {
	v, _ := check(id)
	return v
}

// check returns the verdict and, when alive, what was read about the process.
func check(id Identity) (Verdict, procInfo) {
	if id.PID <= 0 {
		return Verdict{Dead, fmt.Sprintf("invalid pid %d", id.PID)}, procInfo{}
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
	info, err := readProc(id.PID)
	switch {
	case errors.Is(err, ErrGone):
		return Verdict{Dead, fmt.Sprintf("pid %d not running", id.PID)}, procInfo{}
	case err != nil:
		return Verdict{Unknown, err.Error()}, procInfo{}
	case info.startTime != id.StartTime:
		return Verdict{Dead, fmt.Sprintf("pid %d reused (start time %d, recorded %d)", id.PID, info.startTime, id.StartTime)}, procInfo{}
	case info.zombie:
		return Verdict{Dead, fmt.Sprintf("pid %d is a zombie", id.PID)}, procInfo{}
	case info.uid != id.UID:
		// Same PID and start time but another UID: either a setuid change
		// or a forged record. Neither may be acted on.
		return Verdict{Unknown, fmt.Sprintf("pid %d runs as uid %d, recorded %d", id.PID, info.uid, id.UID)}, procInfo{}
	}
	return Verdict{Alive, fmt.Sprintf("pid %d running", id.PID)}, info
}

// verify returns nil if id is alive, or an error wrapping ErrGone or
// ErrUnverifiable with the verdict's reason.
func verify(id Identity) (procInfo, error) {
	v, info := check(id)
	switch v.State {
	case Alive:
		return info, nil
	case Dead:
		return info, fmt.Errorf("owner: %s: %w", v.Reason, ErrGone)
	default:
		// Keep the cause branchable (EMFILE passes, EACCES does not):
		// the verdict holds it only as text.
		if _, err := readProc(id.PID); err != nil && !errors.Is(err, ErrGone) {
			return info, err
		}
		return info, fmt.Errorf("owner: %s: %w", v.Reason, ErrUnverifiable)
	}
}

// refuseSelfOrAncestor returns ErrRefused if pid is the caller or one of its
// ancestors.
func refuseSelfOrAncestor(pid int) error {
	for p, hops := os.Getpid(), 0; p > 0 && hops < 4096; hops++ {
		if p == pid {
			return fmt.Errorf("owner: pid %d: %w", pid, ErrRefused)
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
func Open(id Identity) (*Process, error) {
	if id.PID <= 0 {
		return nil, fmt.Errorf("owner: invalid pid %d: %w", id.PID, ErrGone)
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

// Identity returns the verified identity the handle was opened for.
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
// error wrapping [ErrGone] from the kernel (ESRCH). The caller's own process
// group is refused with [ErrRefused]: signalling it would signal the caller.
func (p *Process) SignalGroup(sig syscall.Signal) error {
	if p.id.PID == getpgrp() {
		return fmt.Errorf("owner: process group %d is the caller's own: %w", p.id.PID, ErrRefused)
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
// confirming that a group is empty, not for hot paths.
func GroupAlive(pgid int) (bool, error) { return groupAlive(pgid) }

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
