package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/ownerjournal/ownerjournal/owner"
)

// forcefulKill is whether endForcefully SIGKILLs what it stopped and
// journaled; a test seam (false) that stands for processes SIGKILL does not
// end in time (uninterruptible sleep), to reach the survivors' path.
var forcefulKill = true

// endForcefully is every round of endTree after the first. What it finds
// was born while the tree was ending (its parent already had SIGTERM and
// the grace period) or outlived the first round, so it gets no second grace:
// each live descendant is stopped at once (a stopped process cannot fork,
// so a chain that re-forks to escape is frozen with the identity it has when
// seen), the walk is repeated until it finds no one new, each is journaled as
// found, and then all are SIGKILLed and awaited on their pidfds, up to the
// deadline (at least the grace period).
func (s *supervisor) endForcefully(ctx context.Context, deadline time.Time) {
	held := map[int]*owner.Process{}
	defer func() {
		for _, p := range held {
			p.Close()
		}
	}()
	for fresh := true; fresh && time.Now().Before(deadline); {
		fresh = false
		for _, id := range s.liveDescendants() {
			if p, ok := held[id.PID]; ok && p.Identity().StartTime == id.StartTime {
				continue
			}
			p, err := owner.Open(id)
			if err != nil {
				continue
			}
			if old, ok := held[id.PID]; ok {
				old.Close()
			}
			p.Signal(syscall.SIGSTOP)
			held[id.PID] = p
			fresh = true
		}
	}
	if s.leader != nil && !s.groupGone() {
		s.leader.SignalGroup(syscall.SIGKILL)
	}
	for _, p := range held {
		if !s.journaled(p.Identity()) {
			s.track(p.Identity())
		}
	}
	wait := max(time.Until(deadline), s.grace)
	done := make(chan struct{}, len(held))
	for pid, p := range held {
		if forcefulKill {
			p.Signal(syscall.SIGKILL)
		}
		go func() {
			wctx, cancel := context.WithTimeout(ctx, wait)
			p.Wait(wctx)
			cancel()
			reapIfChild(pid)
			done <- struct{}{}
		}()
	}
	for range held {
		<-done
	}
}

// groupGone reports whether CMD is verified gone with its whole process
// group: the leader's pidfd shows it exited, and a signal 0 through it
// reaches no one (ESRCH) or reaches only zombies (GroupAlive).
func (s *supervisor) groupGone() bool {
	if s.leader == nil {
		// No handle on CMD (see start): gone once cmd.Wait reaped it; the
		// rest of its group are descendants, which settle checks.
		return s.cmd == nil || s.cmd.Process == nil || s.cmdReaped.Load()
	}
	if !s.leader.Exited() {
		return false
	}
	err := s.leader.SignalGroup(0)
	if errors.Is(err, owner.ErrGone) {
		return true
	}
	if err != nil {
		return false
	}
	// The group still exists, so its number is not another group's.
	alive, err := owner.GroupAlive(s.leader.Identity().PID)
	return err == nil && !alive
}

// settle is the end of endTree: a record is retired only when what it names
// is verified gone. CMD's record goes when CMD's group is verified empty and
// its cgroup (if any) is unpopulated and removed; a descendant's record when
// its pidfd shows it exited. Every descendant still alive is journaled as it
// is now (if it is not already) and stays, and so does CMD's record if its
// group or cgroup is not confirmed empty: run then exits 3 (see exitCode),
// and a later `ownerjournal recover` ends what is left.
func (s *supervisor) settle(began time.Time) {
	var left []string
	cmdGone := true
	if !s.groupGone() {
		cmdGone = false
		left = append(left, fmt.Sprintf("CMD's process group %d", s.cmd.Process.Pid))
	}
	if empty, err := s.cg.empty(); err != nil || !empty {
		cmdGone = false
		left = append(left, fmt.Sprintf("cgroup %s (populated: %v)", s.cg.path(), orErr(!empty, err)))
	} else if err := s.cg.remove(); err != nil {
		cmdGone = false
		left = append(left, fmt.Sprintf("cgroup %s (not removed: %v)", s.cg.path(), err))
	}
	live, werr := s.walkDescendants()
	if werr != nil {
		// Unseen descendants may live: nothing is confirmed gone.
		cmdGone = false
		left = append(left, fmt.Sprintf("descendants run could not all see (%v)", werr))
	}
	for _, id := range live {
		if !s.journaled(id) {
			s.track(id)
		}
		if !s.journaled(id) {
			left = append(left, fmt.Sprintf("pid %d (start time %d, NOT journaled)", id.PID, id.StartTime))
		}
	}
	// Retire the records of the descendants that are gone now. Their
	// watchers (see track) retire them too, but concurrently: run must not
	// exit before they have, or it leaves stale records behind.
	s.mu.Lock()
	var ended []string
	for pid, t := range s.known {
		if t.exited() {
			ended = append(ended, t.id)
			delete(s.known, pid)
		} else {
			left = append(left, fmt.Sprintf("pid %d (record %s)", pid, t.id))
		}
	}
	s.mu.Unlock()
	for _, id := range ended {
		s.retire(id)
	}
	if s.recID != "" && cmdGone {
		s.retire(s.recID)
	}
	if len(left) > 0 {
		s.survivors = left
		s.logf("still running %v after the end of CMD's tree began: %s; their records stay in %s for `ownerjournal recover`",
			time.Since(began).Round(time.Millisecond), strings.Join(left, ", "), s.root.Path())
	}
}

func orErr(v bool, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprint(v)
}

// exitCode is run's exit status once the tree has ended: 3 when something
// could not be confirmed gone (it stays in the journal), exitSpawnerGone
// when the tree was ended because the spawner exited, else CMD's own.
func (s *supervisor) exitCode(cmd int) int {
	s.endMu.Lock()
	defer s.endMu.Unlock()
	switch {
	case len(s.survivors) > 0:
		return exitRetained
	case s.spawnerGone.Load():
		return exitSpawnerGone
	}
	return cmd
}

// onSpawnerGone ends the tree because the spawner exited. CMD's record
// says so first, so that `ownerjournal status` shows why while it ends.
func (s *supervisor) onSpawnerGone() {
	s.spawnerGone.Store(true)
	err := s.sp.err()
	s.logf("%v: ending CMD's tree", err)
	// CMD's group hears of it first, before the record's note (an fsync)
	// and the rest of the tree; endTree's SIGTERM then repeats it.
	if err := s.leaderSignal(syscall.SIGTERM); err != nil && !errors.Is(err, owner.ErrGone) {
		s.logf("signal CMD's group: %v", err)
	}
	// Never after the tree's end has begun: its settle may have retired
	// the record, which a publish would bring back.
	if s.rec != nil && s.endMu.TryLock() {
		if !s.treeEnded && !s.ending.Load() {
			rec := *s.rec
			rec.Note = truncate("ending: "+err.Error(), 1000)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if perr := s.root.Publish(ctx, &rec); perr != nil {
				s.logf("note the spawner's exit in record %s: %v", rec.ID, perr)
			}
			cancel()
		}
		s.endMu.Unlock()
	}
	go s.endTree(context.Background())
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// notStarted reports a spawner that was gone before CMD could start: exit
// status exitSpawnerGone, the reason on stderr.
func (c *cli) notStarted(err error) error {
	if !errors.Is(err, errSpawnerGone) {
		return err
	}
	fmt.Fprintf(c.stderr, "ownerjournal run: %v; CMD was not started\n", err)
	return &exitError{exitSpawnerGone}
}
