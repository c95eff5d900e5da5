package owner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/errs"
)

var bootIDOnce = sync.OnceValues(func() (string, error) {
	s, err := unix.Sysctl("kern.bootsessionuuid")
	if err != nil {
		return "", fmt.Errorf("owner: boot id: %w", err)
	}
	return s, nil
})

func bootID() (string, error) { return bootIDOnce() }

// sszomb is SZOMB from <sys/proc.h>.
const sszomb = 5

func readProc(pid int) (procInfo, error) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil {
		if errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT) {
			return procInfo{}, errs.Wrapf(ErrGone, "owner: pid %d", pid)
		}
		return procInfo{}, fmt.Errorf("owner: pid %d: %w: %w", pid, err, ErrUnverifiable)
	}
	if int(kp.Proc.P_pid) != pid {
		return procInfo{}, errs.Wrapf(ErrGone, "owner: pid %d", pid)
	}
	st := kp.Proc.P_starttime
	return procInfo{
		startTime: uint64(st.Sec)*1e6 + uint64(st.Usec),
		uid:       int(kp.Eproc.Ucred.Uid),
		ppid:      int(kp.Eproc.Ppid),
		pgid:      int(kp.Eproc.Pgid),
		zombie:    kp.Proc.P_stat == sszomb,
	}, nil
}

// handle on darwin is the verified identity: there is no pidfd.
type handle struct {
	pid int
}

func openHandle(id Identity) (handle, error) {
	if _, err := verify(id); err != nil {
		return handle{}, err
	}
	return handle{pid: id.PID}, nil
}

func (h handle) signal(id Identity, sig syscall.Signal, group bool) error {
	// Re-verify immediately before kill(2); the window between the two
	// is the documented caveat of this platform.
	if _, err := verify(id); err != nil {
		return err
	}
	target := h.pid
	if group {
		target = -h.pid
	}
	if err := unix.Kill(target, sig); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return errs.Wrapf(ErrGone, "owner: signal %v to %v", sig, id)
		}
		return fmt.Errorf("owner: signal %v to %v: %w", sig, id, os.NewSyscallError("kill", err))
	}
	return nil
}

func (h handle) exited() bool {
	info, err := readProc(h.pid)
	return errors.Is(err, ErrGone) || (err == nil && info.zombie)
}

// wait uses kqueue EVFILT_PROC/NOTE_EXIT; the context is checked between
// bounded kevent calls.
func (h handle) wait(ctx context.Context) error {
	kq, err := unix.Kqueue()
	if err != nil {
		return os.NewSyscallError("kqueue", err)
	}
	defer unix.Close(kq)
	var ev unix.Kevent_t
	unix.SetKevent(&ev, h.pid, unix.EVFILT_PROC, unix.EV_ADD|unix.EV_ONESHOT)
	ev.Fflags = unix.NOTE_EXIT
	if _, err := unix.Kevent(kq, []unix.Kevent_t{ev}, nil, nil); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return os.NewSyscallError("kevent", err)
	}
	out := make([]unix.Kevent_t, 1)
	for {
		if h.exited() {
			return nil
		}
		ts := unix.NsecToTimespec(int64(100 * time.Millisecond))
		n, err := unix.Kevent(kq, nil, out, &ts)
		if err != nil && err != unix.EINTR {
			return os.NewSyscallError("kevent", err)
		}
		if n > 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func (h handle) close() error { return nil }

// groupAlive on darwin probes with kill(-pgid, 0); zombies count as alive.
func groupAlive(pgid int) (bool, error) {
	err := unix.Kill(-pgid, 0)
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	return err == nil || errors.Is(err, unix.EPERM), nil
}

// getpgrp returns the caller's process group.
func getpgrp() int { return unix.Getpgrp() }
