package owner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/errs"
	"github.com/ownerjournal/ownerjournal/internal/pidfd"
)

// procRoot is where procfs is mounted; a test seam.
var procRoot = "/proc"

var bootIDOnce = sync.OnceValues(func() (string, error) {
	b, err := os.ReadFile(procRoot + "/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("owner: boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
})

func bootID() (string, error) { return bootIDOnce() }

// readProc reads /proc/PID/stat once; the UID is the owner of that file,
// which procfs sets to the process's effective UID (proc(5)). It goes
// through raw descriptors (open, fstat, one read, close): an *os.File costs
// two more system calls and an allocation, and recovery reads one stat per
// record. procfs returns the whole line in one read.
func readProc(pid int) (procInfo, error) {
	path := procRoot + "/" + strconv.Itoa(pid) + "/stat"
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return procInfo{}, procErr(pid, &fs.PathError{Op: "open", Path: path, Err: err})
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return procInfo{}, procErr(pid, &fs.PathError{Op: "fstat", Path: path, Err: err})
	}
	var buf [1024]byte
	var n int
	for {
		n, err = unix.Read(fd, buf[:])
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return procInfo{}, procErr(pid, &fs.PathError{Op: "read", Path: path, Err: err})
	}
	sf, err := parseStat(buf[:max(n, 0)])
	if err != nil {
		return procInfo{}, fmt.Errorf("owner: %s: %w: %w", path, err, ErrUnverifiable)
	}
	return procInfo{
		startTime: sf.startTime,
		uid:       int(st.Uid),
		ppid:      sf.ppid,
		pgid:      sf.pgid,
		zombie:    sf.state == 'Z' || sf.state == 'X' || sf.state == 'x',
	}, nil
}

// procErr maps errors reading a /proc entry: a vanished entry (ENOENT, or
// ESRCH when the process exits between open and read) means gone; anything
// else cannot be verified.
func procErr(pid int, err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
		return errs.Wrapf(ErrGone, "owner: pid %d", pid)
	}
	return fmt.Errorf("owner: pid %d: %w: %w", pid, err, ErrUnverifiable)
}

// handle is a pidfd, kept in an *os.File so that the runtime poller can wait
// for it to become readable (the process exited).
type handle struct {
	f *os.File
}

func openHandle(id Identity) (handle, error) {
	fd, err := unix.PidfdOpen(id.PID, unix.PIDFD_NONBLOCK)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return handle{}, errs.Wrapf(ErrGone, "owner: pid %d not running", id.PID)
		}
		if errors.Is(err, unix.ENOSYS) {
			return handle{}, fmt.Errorf("owner: pidfd_open: %w", errors.ErrUnsupported)
		}
		return handle{}, os.NewSyscallError("pidfd_open", err)
	}
	h := handle{f: os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(id.PID))}
	// Verify after the pidfd exists: if the PID was reused before
	// pidfd_open, the start time read now differs.
	if _, err := verify(id); err != nil {
		h.close()
		return handle{}, err
	}
	// The stat read above described the pidfd's process only if that
	// process was still alive when it was read; it is if it is alive now.
	if h.exited() {
		h.close()
		return handle{}, errs.Wrapf(ErrGone, "owner: pid %d exited", id.PID)
	}
	return h, nil
}

func (h handle) signal(id Identity, sig syscall.Signal, group bool) error {
	flags := 0
	if group {
		flags = unix.PIDFD_SIGNAL_PROCESS_GROUP
	}
	rc, err := h.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = unix.PidfdSendSignal(int(fd), sig, nil, flags)
			if serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	switch {
	case serr == nil:
		return nil
	case errors.Is(serr, unix.ESRCH):
		return errs.Wrapf(ErrGone, "owner: signal %v to %v", sig, id)
	default:
		return fmt.Errorf("owner: signal %v to %v: %w", sig, id, os.NewSyscallError("pidfd_send_signal", serr))
	}
}

func (h handle) exited() bool {
	rc, err := h.f.SyscallConn()
	if err != nil {
		return false
	}
	ready := false
	rc.Control(func(fd uintptr) { ready = pidfd.Readable(int(fd)) })
	return ready
}

// wait blocks on a duplicate of the pidfd so that concurrent waiters with
// different contexts do not share a read deadline.
func (h handle) wait(ctx context.Context) error {
	rc, err := h.f.SyscallConn()
	if err != nil {
		return err
	}
	var dup int
	var derr error
	if err := rc.Control(func(fd uintptr) { dup, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return err
	}
	if derr != nil {
		return os.NewSyscallError("fcntl", derr)
	}
	f := os.NewFile(uintptr(dup), h.f.Name())
	defer f.Close()
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	drc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	err = drc.Read(func(fd uintptr) bool { return pidfd.Readable(int(fd)) })
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	return nil
}

func (h handle) close() error { return h.f.Close() }

func groupAlive(pgid int) (bool, error) {
	// kill(-pgid, 0) delivers nothing; ESRCH says no process, zombie or
	// not, is in the group, which settles it without reading /proc.
	if pgid > 0 && unix.Kill(-pgid, 0) == unix.ESRCH {
		return false, nil
	}
	alive, err := groupSweeps.get()
	if err != nil {
		return false, err
	}
	return alive[pgid], nil
}

// getpgrp returns the caller's process group.
func getpgrp() int { return unix.Getpgrp() }
