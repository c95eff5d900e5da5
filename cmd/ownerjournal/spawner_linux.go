package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/pidfd"
	"github.com/ownerjournal/ownerjournal/owner"
)

// deathSignal is the supervisor's own parent-death signal (prctl(2)
// PR_SET_PDEATHSIG). It is a real-time signal nobody else sends, not
// SIGTERM, because the kernel sends it when the *thread* that forked run
// exits, not the process: a Node worker_threads Worker that spawned run and
// then ended sends it while its process lives on. The signal only wakes the
// watcher up; the spawner's pidfd says whether the process exited. (The
// setting is per thread in the kernel, and new threads start without it; the
// thread that sets it lives as long as the process, since the Go runtime
// retires no thread that is not locked to a goroutine.)
const deathSignal = syscall.Signal(40) // SIGRTMIN+6 in glibc's numbering

// spawnerPlatform holds the spawner's pidfd and the watcher's signals.
type spawnerPlatform struct {
	f    *os.File
	sigs chan os.Signal
	stop chan struct{}
}

// watchSpawner captures the spawner, run's parent, by identity and watches
// it for the rest of run's life. In this order: a pidfd on the parent PID
// read at start (startParent), confirmed to be our parent still (getppid)
// and so this very process; its identity (start time) read while the pidfd
// shows it alive; the parent-death signal armed; and the pidfd polled again,
// which closes the window before the signal was armed. The spawner is
// reported gone (an error wrapping errSpawnerGone) when:
//
//   - the parent exited before any of this, or during it;
//   - $OWNERJOURNAL_SPAWNER names another PID than run's parent: the
//     spawner that set it died before run's first instruction and run was
//     adopted (by init or a subreaper);
//   - without $OWNERJOURNAL_SPAWNER, run's parent is in another session
//     while run leads none: a process shares its parent's session unless it
//     called setsid (and then leads its own), so such a parent is a reaper
//     that adopted run, not its spawner. A reaper in run's own session (a
//     subreaper such as an outer `ownerjournal run`) cannot be told apart
//     from a spawner this way: spawners that may die at once set
//     $OWNERJOURNAL_SPAWNER.
func watchSpawner(log io.Writer) (*spawner, error) {
	sp := &spawner{gone: make(chan struct{}), log: log}
	// A parent PID of 0 is outside our PID namespace (run is its init):
	// there is no spawner to watch from here.
	if ppid := startParent; ppid > 0 {
		fd, err := unix.PidfdOpen(ppid, unix.PIDFD_NONBLOCK)
		switch {
		case errors.Is(err, unix.ESRCH):
			sp.markGone(fmt.Sprintf("run's parent, pid %d, exited before run could watch it", ppid))
		case err != nil:
			return nil, os.NewSyscallError("pidfd_open", err)
		default:
			sp.plat.f = os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(ppid))
			sp.capture(ppid)
		}
	}
	ppid := startParent
	claimed, err := claimedSpawner()
	if err != nil {
		sp.close()
		return nil, err
	}
	// The spawner is this run's, not that of a run inside CMD.
	os.Unsetenv(envSpawner)
	if sp.err() == nil && claimed != 0 && claimed != ppid {
		sp.markGone(fmt.Sprintf("%s names pid %d, but run's parent is pid %d: the spawner exited before run started and run was adopted", envSpawner, claimed, ppid))
	}
	if sp.err() == nil && claimed == 0 && ppid > 0 {
		sid, serr := unix.Getsid(0)
		psid, perr := unix.Getsid(ppid)
		if serr == nil && perr == nil && sid != psid && sid != os.Getpid() {
			sp.markGone(fmt.Sprintf("run's parent, pid %d, is outside run's session (%d) and run leads no session: the spawner exited before run could look and run was adopted (a spawner can name itself in %s)", ppid, sid, envSpawner))
		}
	}
	if err := sp.err(); err != nil {
		sp.close()
		return nil, err
	}
	if sp.plat.f != nil {
		sp.plat.stop = make(chan struct{})
		go sp.waitExit()
		go sp.onDeathSignal()
	}
	return sp, nil
}

// capture reads the parent's identity through its pidfd and arms the
// parent-death signal; it marks the spawner gone if the parent exits on the
// way.
func (sp *spawner) capture(ppid int) {
	gone := func(when string) {
		sp.markGone(fmt.Sprintf("run's parent, pid %d, exited %s", ppid, when))
	}
	// Our parent cannot change PID while it lives: if getppid still says
	// ppid, the pidfd opened before is our parent's.
	if unix.Getppid() != ppid {
		gone("before run could watch it (run was adopted)")
		return
	}
	id, err := owner.Of(ppid)
	if err != nil || sp.exited() {
		gone("before run could read its identity")
		return
	}
	sp.id = id
	// Caught before it is armed: uncaught, a real-time signal ends the
	// process.
	sp.plat.sigs = make(chan os.Signal, 1)
	signal.Notify(sp.plat.sigs, deathSignal)
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(deathSignal), 0, 0, 0); err != nil {
		// Not fatal: the pidfd watch does not depend on it.
		fmt.Fprintf(sp.log, "ownerjournal run: prctl(PR_SET_PDEATHSIG): %v\n", err)
	}
	if sp.exited() {
		gone("while run armed its parent-death signal")
	}
}

// exited polls the pidfd: readable means the process has exited.
func (sp *spawner) exited() bool {
	rc, err := sp.plat.f.SyscallConn()
	if err != nil {
		return false
	}
	done := false
	rc.Control(func(fd uintptr) { done = pidfd.Readable(int(fd)) })
	return done
}

func (sp *spawner) goneNow() {
	sp.markGone(fmt.Sprintf("the spawner, run's parent pid %d (start time %d), exited", sp.id.PID, sp.id.StartTime))
}

// waitExit waits on the pidfd through the runtime's poller (no polling on
// a timer) until the spawner exits or the watch is closed.
func (sp *spawner) waitExit() {
	rc, err := sp.plat.f.SyscallConn()
	if err != nil {
		return
	}
	rc.Read(func(fd uintptr) bool { return pidfd.Readable(int(fd)) })
	if sp.exited() {
		sp.goneNow()
	}
}

// onDeathSignal looks at the spawner whenever the parent-death signal
// arrives: a parent *thread* that ended sends it too. The kernel re-parents
// run before it sends the signal (forget_original_parent): to another
// thread of the spawner if one lives on, else to a reaper. So getppid tells
// the two apart at once, while the dying spawner's pidfd turns readable only
// at the end of its exit (waitExit catches that too).
func (sp *spawner) onDeathSignal() {
	for {
		select {
		case <-sp.plat.sigs:
			if unix.Getppid() != sp.id.PID || sp.exited() {
				sp.goneNow()
			} else {
				fmt.Fprintf(sp.log, "ownerjournal run: parent-death signal, but the spawner (pid %d) lives on: the thread of it that started run ended\n", sp.id.PID)
			}
		case <-sp.plat.stop:
			return
		}
	}
}

// check re-checks the spawner now; it returns an error wrapping
// errSpawnerGone when it is gone.
func (sp *spawner) check() error {
	if sp.plat.f != nil && (unix.Getppid() != sp.id.PID || sp.exited()) {
		sp.goneNow()
	}
	return sp.err()
}

// close stops the watch and disarms the parent-death signal (uncaught, it
// would end the process). It does not affect the spawner.
func (sp *spawner) close() {
	if sp.plat.sigs != nil {
		unix.Prctl(unix.PR_SET_PDEATHSIG, 0, 0, 0, 0)
		signal.Stop(sp.plat.sigs)
	}
	if sp.plat.stop != nil {
		close(sp.plat.stop)
	}
	if sp.plat.f != nil {
		sp.plat.f.Close()
	}
}
