package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// TestRunWatchWaitFailureIsNotExit: a descendant's watcher whose pidfd wait
// fails because the descriptor table is full (endTree's handles can fill it)
// must not take the failure for the descendant's exit: its record stays
// while it lives, and goes once it has exited. The helper (watchwait) fills
// its own descriptor table around a real watcher on a real sleeping child.
func TestRunWatchWaitFailureIsNotExit(t *testing.T) {
	root := newRoot(t)
	p := helper(t, "watchwait", root)
	require.Equal(t, 0, p.wait(t), "stdout:\n%s\nstderr:\n%s", p.out, p.errb)
}

// helperWatchWait: watchwait ROOT (see TestRunWatchWaitFailureIsNotExit).
func helperWatchWait(args []string) error {
	s, err := reviewSupervisor("watchwait", args)
	if err != nil {
		return err
	}
	r := s.root
	defer r.Close()
	child := exec.Command("sleep", "1000")
	if err := child.Start(); err != nil {
		return err
	}
	defer child.Process.Kill()
	id, err := owner.Of(child.Process.Pid)
	if err != nil {
		return err
	}
	p, err := owner.Open(id)
	if err != nil {
		return err
	}
	rec := &journal.Record{Kind: journal.KindProcess, Label: "descendant", Subject: &id, Owner: s.self, Phase: journal.PhaseLive}
	if err := s.publish(nil, rec, "journal", "the child"); err != nil {
		return err
	}
	t := &tracked{id: rec.ID, p: p, sub: id}
	s.known[id.PID] = t
	s.jl.watches = 1

	// Fill the descriptor table, then start the watcher.
	lim := unix.Rlimit{Cur: 256, Max: 256}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	var fillers []int
	for {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			if !errors.Is(err, unix.EMFILE) {
				return err
			}
			break
		}
		fillers = append(fillers, fd)
	}
	done := make(chan struct{})
	go func() { s.watch(t); close(done) }()
	waitFailed := func() bool {
		s.jl.mu.Lock()
		defer s.jl.mu.Unlock()
		return s.jl.counts["wait on"] > 0
	}
	returned := false
	for end := time.Now().Add(waitLimit); !waitFailed(); {
		select {
		case <-done:
			returned = true
		case <-time.After(10 * time.Millisecond):
		}
		if returned || time.Now().After(end) {
			break
		}
	}
	for _, fd := range fillers {
		unix.Close(fd)
	}
	if !returned && !waitFailed() {
		return errors.New("the watcher neither failed its wait nor returned")
	}
	if st := owner.Check(id).State; st != owner.Alive {
		return fmt.Errorf("the child is %v, not alive", st)
	}
	if ok, err := recorded(r, rec.ID); err != nil || !ok {
		return fmt.Errorf("record %s of live pid %d retired after a failed wait (watcher returned: %v, err %v)", rec.ID, id.PID, returned, err)
	}
	// The wait succeeds again: the exit is noticed and the record retired.
	child.Process.Kill()
	select {
	case <-done:
	case <-time.After(waitLimit):
		return errors.New("the watcher did not notice the exit")
	}
	if ok, err := recorded(r, rec.ID); err != nil || ok {
		return fmt.Errorf("record %s of exited pid %d not retired (err %v)", rec.ID, id.PID, err)
	}
	return nil
}

func recorded(r *journal.Root, id string) (bool, error) {
	sc, err := r.Scan()
	if err != nil {
		return false, err
	}
	for _, rec := range sc.Records {
		if rec.ID == id {
			return true, nil
		}
	}
	return false, nil
}

// TestRunEndWithoutLeaderHandle: when no handle on CMD could be had (the
// "hold" failure run reports and goes on from, EMFILE at start), an end of
// the tree that begins while CMD lives (a signal's grace over, the spawner
// gone, a fail-closed) must still end CMD, and must not retire CMD's record
// unless CMD is verified gone. The helper (endnoleader) is such a
// supervisor with CMD a real sleeping child.
func TestRunEndWithoutLeaderHandle(t *testing.T) {
	root := newRoot(t)
	p := helper(t, "endnoleader", root)
	require.Equal(t, 0, p.wait(t), "stdout:\n%s\nstderr:\n%s", p.out, p.errb)
}

// helperEndNoLeader: endnoleader ROOT (see TestRunEndWithoutLeaderHandle).
func helperEndNoLeader(args []string) error {
	s, err := reviewSupervisor("endnoleader", args)
	if err != nil {
		return err
	}
	r := s.root
	defer r.Close()
	s.cmd = exec.Command("sleep", "1000")
	s.cmd.SysProcAttr = childAttr(s.cg)
	if err := s.cmd.Start(); err != nil {
		return err
	}
	defer s.cmd.Process.Kill()
	go func() {
		s.cmd.Wait()
		s.cmdReaped.Store(true)
	}()
	id, err := owner.Of(s.cmd.Process.Pid)
	if err != nil {
		return err
	}
	rec := &journal.Record{Kind: journal.KindProcess, Label: "cmd", Subject: &id, PGID: id.PID, Owner: s.self, Phase: journal.PhaseLive}
	if err := s.publish(nil, rec, "publish", "CMD's record"); err != nil {
		return err
	}
	s.recID, s.rec = rec.ID, rec
	// s.leader stays nil: no handle on CMD.
	s.endTree(context.Background())
	alive := owner.Check(id).State == owner.Alive
	kept, err := recorded(r, rec.ID)
	if err != nil {
		return err
	}
	switch {
	case alive && !kept:
		return fmt.Errorf("CMD (pid %d) lives and its record %s was retired (survivors %q)", id.PID, rec.ID, s.survivors)
	case alive:
		return fmt.Errorf("CMD (pid %d) was not ended (record kept, survivors %q)", id.PID, s.survivors)
	case kept:
		return fmt.Errorf("CMD (pid %d) is gone but its record %s was kept (survivors %q)", id.PID, rec.ID, s.survivors)
	}
	return nil
}

// TestRunFailClosedWithSurvivorsSaysSo: after run failed closed, its exit
// error must not say the tree was ended when settle found part of it alive.
// The helper (failsurvivor) fails closed, then settles with a live child.
func TestRunFailClosedWithSurvivorsSaysSo(t *testing.T) {
	root := newRoot(t)
	p := helper(t, "failsurvivor", root)
	require.Equal(t, 0, p.wait(t), "stdout:\n%s\nstderr:\n%s", p.out, p.errb)
}

// helperFailSurvivor: failsurvivor ROOT (see
// TestRunFailClosedWithSurvivorsSaysSo).
func helperFailSurvivor(args []string) error {
	s, err := reviewSupervisor("failsurvivor", args)
	if err != nil {
		return err
	}
	r := s.root
	defer r.Close()
	// CMD has exited and was reaped; a child of the supervisor lives on.
	child, err := reapedCMDAndLiveChild(s)
	if err != nil {
		return err
	}
	defer child.Wait()
	defer child.Process.Kill()
	s.failClosed(errors.New("a descendant cannot be journaled"))
	s.settle(time.Now())
	if len(s.survivors) == 0 {
		return errors.New("settle found no survivor")
	}
	ferr := s.journalFailure()
	if ferr == nil {
		return errors.New("no failure after failing closed")
	}
	if strings.Contains(ferr.Error(), "the tree was ended") {
		return fmt.Errorf("exit error claims an end that did not happen (survivors %q): %v", s.survivors, ferr)
	}
	for _, rec := range mustScan(r) {
		s.retire(rec.ID)
	}
	return nil
}

func mustScan(r *journal.Root) []*journal.Record {
	sc, err := r.Scan()
	if err != nil {
		return nil
	}
	return sc.Records
}

// TestRunSettleUnreadableWalkIsNotClean: when the walk of run's descendants
// cannot read /proc (a full descriptor table), settle must not take the
// missing list for an empty tree: a live descendant goes unseen, and run
// would exit with CMD's status, 0, as if the end were confirmed. The helper
// (walkemfile) settles with a live child and its descriptor table full.
func TestRunSettleUnreadableWalkIsNotClean(t *testing.T) {
	root := newRoot(t)
	p := helper(t, "walkemfile", root)
	require.Equal(t, 0, p.wait(t), "stdout:\n%s\nstderr:\n%s", p.out, p.errb)
}

// helperWalkEMFILE: walkemfile ROOT (see
// TestRunSettleUnreadableWalkIsNotClean).
func helperWalkEMFILE(args []string) error {
	s, err := reviewSupervisor("walkemfile", args)
	if err != nil {
		return err
	}
	r := s.root
	defer r.Close()
	child, err := reapedCMDAndLiveChild(s)
	if err != nil {
		return err
	}
	defer child.Wait()
	defer child.Process.Kill()
	lim := unix.Rlimit{Cur: 256, Max: 256}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	var fillers []int
	for {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			if !errors.Is(err, unix.EMFILE) {
				return err
			}
			break
		}
		fillers = append(fillers, fd)
	}
	s.settle(time.Now())
	for _, fd := range fillers {
		unix.Close(fd)
	}
	if len(s.survivors) == 0 {
		return fmt.Errorf("settle confirmed the end with pid %d alive and unseen", child.Process.Pid)
	}
	return nil
}

// reviewSupervisor opens the root named by args (exactly one, else a usage
// error naming the helper) and makes a supervisor on it as run would, with
// a 200 ms grace and no cgroup. The caller closes s.root.
func reviewSupervisor(name string, args []string) (*supervisor, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("usage: %s ROOT", name)
	}
	r, err := openAt(args[0])
	if err != nil {
		return nil, err
	}
	s := &supervisor{c: &cli{stdout: os.Stdout, stderr: os.Stderr}, root: r, grace: 200 * time.Millisecond, known: map[int]*tracked{}, seen: map[int]uint64{}, jl: newJournalLog()}
	if s.self, err = owner.Self(); err == nil {
		s.cg, err = newContainment("off")
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return s, nil
}

// reapedCMDAndLiveChild sets s up as after CMD exited and was reaped while a
// child of the supervisor lives on (the caller kills and waits for it).
func reapedCMDAndLiveChild(s *supervisor) (*exec.Cmd, error) {
	s.cmd = exec.Command("true")
	if err := s.cmd.Run(); err != nil {
		return nil, err
	}
	s.cmdReaped.Store(true)
	child := exec.Command("sleep", "1000")
	return child, child.Start()
}
