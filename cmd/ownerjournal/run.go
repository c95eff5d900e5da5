package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ownerjournal/ownerjournal/internal/safetext"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

// envSpawner, when set, is the PID of the process that spawned `run`; run
// starts nothing if its parent is no longer that process (the spawner died
// before run's first instruction). See watchSpawner.
const envSpawner = "OWNERJOURNAL_SPAWNER"

// scanInterval is how often the supervisor looks for descendants to journal.
// A descendant is journaled once it has been seen by two consecutive scans,
// so within 2×scanInterval of appearing (the contract says 250 ms).
var scanInterval = 100 * time.Millisecond

func (c *cli) run(args []string) error {
	// The spawner is captured before anything else, flags included.
	sp, spErr := watchSpawner(c.stderr)
	if sp != nil {
		defer sp.close()
	}
	f := c.flags("run")
	rootFlag := f.String("root", "", "root directory")
	label := f.String("label", "", "a label for reports")
	grace := f.Duration("grace", recover.DefaultGrace, "time between SIGTERM and SIGKILL when ending the tree")
	cgMode := f.String("cgroup", "auto", "put CMD in a cgroup of its own: auto, require or off")
	if err := parse(f, args); err != nil {
		return err
	}
	argv := f.Args()
	if len(argv) == 0 {
		return usagef("run needs a command after --")
	}
	if *grace <= 0 {
		return usagef("--grace must be positive")
	}
	switch *cgMode {
	case "auto", "require", "off":
	default:
		return usagef("--cgroup must be auto, require or off, not %q", *cgMode)
	}
	if spErr != nil {
		return c.notStarted(spErr)
	}
	r, err := openRoot(*rootFlag)
	if err != nil {
		return err
	}
	defer r.Close()
	lease, err := r.Lease()
	if err != nil {
		return err
	}
	s := &supervisor{c: c, root: r, label: *label, grace: *grace, cgMode: *cgMode, sp: sp, known: map[int]*tracked{}, seen: map[int]uint64{}, jl: newJournalLog()}
	s.prepareJournal(lease)
	defer s.closeJournal()
	code, err := s.run(argv)
	if err != nil {
		return c.notStarted(err)
	}
	return &exitError{code}
}

// tracked is a journaled descendant with its verified handle.
type tracked struct {
	id    string
	p     *owner.Process // nil when no handle could be had
	sub   owner.Identity
	group bool
}

type supervisor struct {
	c      *cli
	root   *journal.Root
	label  string
	grace  time.Duration
	cgMode string
	sp     *spawner

	self   owner.Identity
	cmd    *exec.Cmd
	leader *owner.Process // CMD's pidfd, held for its group's life
	recID  string
	rec    *journal.Record // CMD's record, for notes while the tree ends
	cg     *containment
	tty    *terminal // stdin's terminal when run is in its foreground

	cmdReaped   atomic.Bool // CMD was reaped: its PID may now be another's
	spawnerGone atomic.Bool // the tree is ended because the spawner exited
	survivors   []string    // under endMu: what endTree could not confirm gone

	endMu     sync.Mutex
	treeEnded bool        // under endMu: endTree ran to completion
	ending    atomic.Bool // endTree has begun: scans stop journaling

	mu    sync.Mutex
	known map[int]*tracked // journaled descendants by PID
	seen  map[int]uint64   // PID → start time seen by the previous scan

	jl *journalLog // journaling failures (run_journal.go)
}

func (s *supervisor) logf(format string, a ...any) {
	fmt.Fprintf(s.c.stderr, "ownerjournal run: "+format+"\n", safetext.Args(a)...)
}

func (s *supervisor) run(argv []string) (int, error) {
	var err error
	if s.self, err = owner.Self(); err != nil {
		return 0, err
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	// A closed stdout or stderr (a SIGKILLed runner's pipes) must not kill
	// the supervisor halfway through its cleanup: caught (not ignored, which
	// CMD would inherit), SIGPIPE turns failed writes into EPIPE errors.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)

	if err := becomeSupervisor(); err != nil {
		return 0, err
	}
	// Job-control signals are caught before CMD exists: a Ctrl-Z typed
	// before the loop runs is not lost.
	s.tty = openTerminal()
	jobSigs := s.tty.notify()
	if err := s.start(argv); err != nil {
		return 0, err
	}
	exited := make(chan error, 1)
	go func() {
		err := s.cmd.Wait()
		s.cmdReaped.Store(true)
		exited <- err
	}()
	spawnerGone := s.sp.gone

	tick := time.NewTicker(scanInterval)
	defer tick.Stop()
	// After the first signal, CMD gets the grace period to shut down in its
	// own order (a server stopping its tmux servers) before the tree is
	// ended around it.
	var graceOver <-chan time.Time
	failed := s.jl.failc
	for done := false; !done; {
		select {
		case <-exited:
			done = true
			ws, _ := s.cmd.ProcessState.Sys().(syscall.WaitStatus)
			s.tty.release(s.cmd.Process.Pid, ws.Signaled())
		case <-failed:
			failed = nil
			go s.endTree(context.Background())
		case sig := <-jobSigs:
			s.onJobSignal(sig)
		case sig := <-sigs:
			// Forward to CMD's whole group. Later signals never cut the
			// cleanup short: they are forwarded too.
			if err := s.leaderSignal(sig.(syscall.Signal)); err != nil && !errors.Is(err, owner.ErrGone) {
				s.logf("forward %v: %v", sig, err)
			}
			if graceOver == nil {
				graceOver = time.After(s.grace)
			}
		case <-graceOver:
			go s.endTree(context.Background())
		case <-spawnerGone:
			spawnerGone = nil
			s.onSpawnerGone()
		case <-tick.C:
			s.scan()
		}
	}
	s.endTree(context.Background())
	if err := s.journalFailure(); err != nil {
		return 0, err
	}
	return s.exitCode(exitStatus(s.cmd.ProcessState)), nil
}

func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// start publishes an intent record, starts CMD in its own process group
// (and cgroup), and updates the record to live, all inside one admission.
func (s *supervisor) start(argv []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, err := s.root.Admit(ctx)
	if err != nil {
		return err
	}
	defer adm.Done()
	if s.cg, err = newContainment(s.cgMode); err != nil {
		return err
	}
	rec := &journal.Record{Kind: journal.KindProcess, Label: s.label, Owner: s.self, Phase: journal.PhaseIntent, Cgroup: s.cg.path(), Note: s.cg.why}
	if err := s.publish(adm, rec, "publish", "CMD's intent record"); err != nil {
		return err
	}
	s.recID, s.rec = rec.ID, rec
	if err := s.cg.create(s.cgMode); err != nil {
		s.root.Retire(rec.ID)
		return err
	}
	rec.Cgroup, rec.CgroupID, rec.Note = s.cg.path(), s.cg.id, s.cg.why
	if rec.CgroupID != 0 {
		// Record the group's id before CMD runs in it: recovery acts only
		// on the group with this id, never on one made later by that name.
		if err := adm.Publish(rec); err != nil {
			s.root.Retire(rec.ID)
			s.cg.remove()
			return err
		}
	}
	s.cmd = exec.Command(argv[0], argv[1:]...)
	s.cmd.Stdin, s.cmd.Stdout, s.cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	s.cmd.SysProcAttr = childAttr(s.cg)
	s.tty.foreground(s.cmd.SysProcAttr)
	// The last look before CMD exists: a spawner gone by now never sees
	// CMD started.
	err = s.sp.check()
	if err == nil {
		err = s.cmd.Start()
	}
	if err != nil {
		s.root.Retire(rec.ID)
		s.cg.remove()
		return err
	}
	// CMD is our unreaped child, so its PID cannot be reused before Wait.
	// From here on CMD runs: failures are reported and supervision goes
	// on, since returning would leave CMD's tree to nobody.
	id, err := owner.Of(s.cmd.Process.Pid)
	if err == nil {
		if s.leader, err = owner.Open(id); err != nil && !errors.Is(err, owner.ErrGone) {
			s.failure("hold", fmt.Sprintf("CMD (pid %d)", id.PID), fmt.Errorf("%w; its process group will not be signalled", err))
			err = nil // its identity is known: journal it all the same
		}
	}
	if err != nil {
		if !errors.Is(err, owner.ErrGone) {
			s.failClosed(fmt.Errorf("CMD (pid %d) cannot be identified: %w", s.cmd.Process.Pid, err))
		}
		return nil // exited already: its end is handled by endTree
	}
	rec.Subject, rec.PGID, rec.Phase = &id, id.PID, journal.PhaseLive
	if err := s.publish(adm, rec, "update", "CMD's record to live"); err != nil {
		s.failClosed(fmt.Errorf("CMD (pid %d) cannot be journaled (its intent record %s names no subject): %w", id.PID, rec.ID, err))
	}
	return nil
}

func (s *supervisor) leaderSignal(sig syscall.Signal) error {
	if s.leader == nil {
		return s.cmdSignal(sig)
	}
	return s.leader.SignalGroup(sig)
}

// cmdSignal signals CMD alone through os/exec's own handle, for when no
// handle on CMD could be had (start's "hold" failure): os.Process never
// signals a process it has reaped, and CMD's group is not signalled, since
// nothing verifies it; its other members are descendants, ended one by one.
func (s *supervisor) cmdSignal(sig syscall.Signal) error {
	if s.cmd == nil || s.cmd.Process == nil || s.cmdReaped.Load() {
		return owner.ErrGone
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return owner.ErrGone
		}
		return err
	}
	return nil
}

// endCMDWithoutHandle is endGracefully's part for CMD when there is no
// handle on it: SIGTERM, the grace period, SIGKILL, each through cmdSignal,
// then a wait for CMD's reaping (by cmd.Wait) of up to another grace.
func (s *supervisor) endCMDWithoutHandle() {
	awaitReaped := func(d time.Duration) bool {
		for end := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
			if s.cmdReaped.Load() {
				return true
			}
			if time.Now().After(end) {
				return false
			}
		}
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if err := s.cmdSignal(sig); err != nil {
			if !errors.Is(err, owner.ErrGone) {
				s.logf("signal CMD (pid %d): %v", s.cmd.Process.Pid, err)
			}
			return
		}
		if awaitReaped(s.grace) {
			return
		}
	}
}

// scan journals descendants that have lived for a whole scan interval and
// reaps adopted children that have exited.
func (s *supervisor) scan() {
	if s.ending.Load() {
		return
	}
	live := s.liveDescendants()
	next := make(map[int]uint64, len(live))
	for _, id := range live {
		pid := id.PID
		next[pid] = id.StartTime
		if s.journaled(id) || s.seen[pid] != id.StartTime {
			continue
		}
		s.track(id)
	}
	s.seen = next
}

// endTree ends CMD's group, its cgroup and every descendant, in parallel,
// with the grace/escalation of recover.Terminate; whatever is still found
// after that graceful round was born during the ending or outlived it, and is
// stopped, journaled and killed (endForcefully) until nothing is left or the
// deadline passes. Then settle retires only what is verified gone. It runs
// to completion once; a concurrent call waits for it.
func (s *supervisor) endTree(ctx context.Context) {
	s.endMu.Lock()
	defer s.endMu.Unlock()
	if s.treeEnded {
		return
	}
	defer func() { s.treeEnded = true }()
	// No new descendant records from the scans from here on: the ending
	// journals only what it cannot confirm gone.
	s.ending.Store(true)
	began := time.Now()
	deadline := began.Add(4 * s.grace)
	for round := 0; ; round++ {
		if round == 0 {
			s.endGracefully(ctx)
		} else {
			s.endForcefully(ctx, deadline)
		}
		// Whatever is still in the cgroup after the round (a member that
		// escaped the process tree view) ends at once.
		if err := s.cg.kill(ctx, s.grace); err != nil {
			s.logf("%v", err)
		}
		live, err := s.walkDescendants()
		if (len(live) == 0 && err == nil) || time.Now().After(deadline) {
			break
		}
		if err != nil {
			time.Sleep(scanInterval) // no busy walk while descriptors are short
		}
	}
	s.settle(began)
}

// endGracefully is the first round of endTree: SIGTERM to CMD's group and to
// every descendant, the grace period, then SIGKILL, all in parallel.
func (s *supervisor) endGracefully(ctx context.Context) {
	var wg sync.WaitGroup
	if s.leader != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := recover.Terminate(ctx, s.leader, true, s.grace); err != nil {
				s.logf("%v", err)
			}
		}()
	} else {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.endCMDWithoutHandle()
		}()
	}
	for _, id := range s.liveDescendants() {
		pid := id.PID
		p, err := owner.Open(id)
		if err != nil {
			if !errors.Is(err, owner.ErrGone) {
				// Tried again next round (EMFILE passes as other
				// terminations close their handles).
				s.failure("open a handle to end", fmt.Sprintf("descendant pid %d", pid), err)
			}
			continue
		}
		pg, _ := owner.GroupOf(pid)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer p.Close()
			if _, err := recover.Terminate(ctx, p, pg == pid, s.grace); err != nil {
				s.logf("%v", err)
			}
			reapIfChild(pid)
		}()
	}
	wg.Wait()
}

// liveDescendants returns the identities of the supervisor's descendants
// other than CMD that are running (not zombies), reaping adopted zombies on
// the way.
func (s *supervisor) liveDescendants() []owner.Identity {
	live, _ := s.walkDescendants()
	return live
}

// walkDescendants is liveDescendants with the first failure to see a
// descendant (its children or its identity unreadable, not its exit): the
// list is then incomplete, and its being empty confirms nothing.
func (s *supervisor) walkDescendants() ([]owner.Identity, error) {
	var live []owner.Identity
	pids, werr := descendants(s.self.PID)
	for _, pid := range pids {
		// CMD is skipped until it is reaped (its exit is cmd.Wait's);
		// after that its PID is anybody's, a new descendant's included.
		if s.cmd.Process != nil && pid == s.cmd.Process.Pid && !s.cmdReaped.Load() {
			continue
		}
		id, err := owner.Of(pid)
		if err != nil {
			if !errors.Is(err, owner.ErrGone) && werr == nil {
				werr = fmt.Errorf("pid %d: %w", pid, err)
			}
			reapIfChild(pid)
			continue
		}
		live = append(live, id)
	}
	return live, werr
}
