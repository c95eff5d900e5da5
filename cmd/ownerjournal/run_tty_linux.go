package main

import (
	"bytes"
	"errors"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// terminal is the terminal run shares with CMD: stdin, when it is a
// terminal whose foreground process group is run's own at start. Then run
// acts as a shell does for a foreground job (see the Job Control section of
// bash(1) and the glibc manual's "Implementing a Job Control Shell"): CMD's
// process group is made the foreground group as CMD starts (SysProcAttr
// Foreground, which the child does with its signals blocked); when CMD is
// stopped (Ctrl-Z's SIGTSTP, or SIGTTIN/SIGTTOU from a background read or
// write), run takes the terminal back and stops its own process group with
// SIGTSTP, so that the shell above it regains control; when run is
// continued (fg, bg), it gives CMD the terminal again if run has it (fg) and
// sends SIGCONT to CMD's group; when CMD ends, run takes the terminal back.
// A run in the background of its terminal never touches it.
type terminal struct {
	fd      int
	ours    int           // run's process group, in the foreground at start
	modes   *unix.Termios // the terminal's modes at start
	sigs    chan os.Signal
	stopped bool // CMD was seen stopped and run stopped itself since
}

// openTerminal returns the terminal of stdin when run is in its foreground,
// else nil: then nothing about terminals changes.
func openTerminal() *terminal {
	fd := int(os.Stdin.Fd())
	modes, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil
	}
	fg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || fg != unix.Getpgrp() {
		return nil
	}
	return &terminal{fd: fd, ours: fg, modes: modes}
}

// foreground makes CMD's new process group the terminal's foreground group
// as CMD starts. CMD's stdin is the terminal: descriptor 0 in the child.
func (t *terminal) foreground(a *syscall.SysProcAttr) {
	if t == nil {
		return
	}
	a.Foreground, a.Ctty = true, 0
}

// notify returns the job-control signals run must act on: SIGCHLD (CMD may
// have stopped) and SIGCONT (run was continued). It returns nil (a channel
// that never delivers) without a terminal. Each signal is a prompt to look
// at CMD's state, so a SIGCHLD dropped while one is pending loses nothing.
func (t *terminal) notify() <-chan os.Signal {
	if t == nil {
		return nil
	}
	t.sigs = make(chan os.Signal, 4)
	signal.Notify(t.sigs, syscall.SIGCHLD, syscall.SIGCONT)
	return t.sigs
}

// onJobSignal handles one job-control signal for the supervisor's CMD.
func (s *supervisor) onJobSignal(sig os.Signal) {
	t := s.tty
	// Once CMD is reaped its PID may be anybody's.
	if t == nil || s.leader == nil || s.cmdReaped.Load() {
		return
	}
	pgid := s.leader.Identity().PID
	switch sig {
	case syscall.SIGCHLD:
		if t.stopped || !stoppedByJobControl(pgid) {
			return
		}
		t.stopped = true
		// Take the terminal back (run is in the background of it now, so
		// SIGTTOU is blocked for the call), then stop like the job it is.
		if fg, err := unix.IoctlGetInt(t.fd, unix.TIOCGPGRP); err == nil && fg == pgid {
			if err := tcsetpgrp(t.fd, t.ours); err != nil {
				s.logf("take the terminal back from CMD: %v", err)
			}
		}
		unix.Kill(-t.ours, unix.SIGTSTP)
	case syscall.SIGCONT:
		if !t.stopped {
			return
		}
		t.stopped = false
		// fg gave run's group the terminal: pass it on to CMD. bg did
		// not: CMD goes on in the background, as the job does.
		if fg, err := unix.IoctlGetInt(t.fd, unix.TIOCGPGRP); err == nil && fg == t.ours {
			if err := tcsetpgrp(t.fd, pgid); err != nil {
				s.logf("give the terminal to CMD: %v", err)
			}
		}
		if err := s.leader.SignalGroup(syscall.SIGCONT); err != nil {
			s.logf("continue CMD: %v", err)
		}
	}
}

// release stops the job-control signals and, when CMD's group (or a group
// that is gone) still has the terminal, gives it back to run's group, as a
// shell does when a foreground job ends. A CMD killed by a signal may leave
// the terminal in its own modes (raw, no echo): then the modes of the start
// are restored, as bash does for a job that dies of a signal.
func (t *terminal) release(cmdPgid int, signalled bool) {
	if t == nil {
		return
	}
	signal.Stop(t.sigs)
	fg, err := unix.IoctlGetInt(t.fd, unix.TIOCGPGRP)
	if err != nil || fg == t.ours {
		return
	}
	if fg == cmdPgid || unix.Kill(-fg, 0) == unix.ESRCH {
		if tcsetpgrp(t.fd, t.ours) == nil && signalled {
			unix.IoctlSetTermios(t.fd, unix.TCSETSW, t.modes)
		}
	}
}

// tcsetpgrp sets the terminal's foreground process group with SIGTTOU
// blocked in the calling thread: from a background group, tcsetpgrp(3)
// otherwise sends SIGTTOU to the caller's group, and with a handler
// installed the call restarts forever (tty_check_change). Blocking it on
// one locked thread, rather than ignoring it in the process, keeps the
// disposition CMD inherits untouched.
func tcsetpgrp(fd, pgid int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set, old unix.Sigset_t
	const bits = int(unsafe.Sizeof(set.Val[0])) * 8
	n := int(unix.SIGTTOU) - 1
	set.Val[n/bits] |= 1 << uint(n%bits)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		return os.NewSyscallError("pthread_sigmask", err)
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	for {
		err := unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, pgid)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// stoppedByJobControl reports whether CMD (the unreaped leader pid) is
// stopped by a signal: state T in /proc/PID/stat (proc(5)), the field after
// the last ')'.
func stoppedByJobControl(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'T'
}
