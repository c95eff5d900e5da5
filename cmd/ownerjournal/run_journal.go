package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// How `run` keeps its journal truthful when the root's file system, the
// descriptor table or memory runs short (a full disk, `ulimit -n`, a
// read-only root):
//
//   - Every failure to publish, update or retire a record, or to open a
//     handle on a descendant, is logged once (per record or PID and
//     operation) with its reason, and counted; the counts are printed when
//     run ends.
//   - A reserve of reserveSize bytes is kept in run's own lease file
//     ([journal.Lease.Reserve]); a publish that fails with ENOSPC or EDQUOT
//     releases reserveChunk bytes of it and is retried, until it succeeds or
//     the reserve is spent. The reserve lives in the lease file, so a
//     SIGKILLed run leaves no extra entry in the root. It reserves bytes, not
//     inodes.
//   - The descriptor limit: since Go 1.19 the runtime raises its own soft
//     RLIMIT_NOFILE to the hard limit at start-up (to hard-1 since Go 1.22,
//     see syscall/rlimit.go, go.dev/issue/46279) and os/exec restores the
//     original soft limit in every child it starts; run relies on that
//     rather than calling setrlimit itself, which would make the runtime stop
//     restoring the limit, so CMD runs with the limit its caller gave it.
//     A descendant run cannot hold a pidfd on (EMFILE) is journaled all the
//     same: the record needs its identity, not a descriptor.
//   - When a descendant (or CMD itself) still cannot be journaled, run fails
//     closed: it ends the whole tree and exits 1 with the reason, instead of
//     supervising something recovery could not find.
const (
	reserveSize  = 64 << 10
	reserveMin   = 4 << 10
	reserveChunk = 16 << 10
)

// journalLog accounts for run's journaling failures. It is safe for
// concurrent use.
type journalLog struct {
	mu       sync.Mutex
	logged   map[string]bool
	distinct map[string]int // distinct failures logged, by operation
	counts   map[string]int
	watches  int           // pidfds descendants' watchers may still hold
	failed   error         // the reason run failed closed, first one wins
	failc    chan struct{} // closed when run fails closed
	reserve  *journal.Reserve
}

func newJournalLog() *journalLog {
	return &journalLog{logged: map[string]bool{}, distinct: map[string]int{}, counts: map[string]int{}, failc: make(chan struct{})}
}

// failure counts one failure of op on what, and logs it the first time.
func (s *supervisor) failure(op, what string, err error) {
	jl := s.jl
	jl.mu.Lock()
	jl.counts[op]++
	key := op + "\x00" + what
	first := !jl.logged[key]
	jl.logged[key] = true
	n := 0
	if first {
		jl.distinct[op]++
		n = jl.distinct[op]
	}
	jl.mu.Unlock()
	switch {
	case n > 0 && n < maxLogged:
		s.logf("cannot %s %s: %v", op, what, err)
	case n == maxLogged:
		s.logf("cannot %s %s: %v (further failures to %s are counted, not logged)", op, what, err, op)
	}
}

// maxLogged is how many distinct failures of one operation are logged; the
// rest are counted, so a tree of thousands cannot flood the log.
const maxLogged = 3

// failClosed makes run end the tree and exit 1 with reason (the first one
// given); the supervision loop watches jl.failc.
func (s *supervisor) failClosed(reason error) {
	jl := s.jl
	jl.mu.Lock()
	defer jl.mu.Unlock()
	if jl.failed != nil {
		return
	}
	jl.failed = reason
	s.logf("%v: ending the tree (fail closed: recovery could not find what is not journaled)", reason)
	close(jl.failc)
}

// journalFailure is the error run exits with after failing closed, nil
// otherwise; it also prints the failure counts when there were any.
func (s *supervisor) journalFailure() error {
	s.endMu.Lock() // before jl.mu: endTree holds endMu and counts failures
	survived := len(s.survivors) > 0
	s.endMu.Unlock()
	jl := s.jl
	jl.mu.Lock()
	defer jl.mu.Unlock()
	if len(jl.counts) > 0 {
		var parts []string
		for op, n := range jl.counts {
			parts = append(parts, fmt.Sprintf("%d %s", n, op))
		}
		sort.Strings(parts)
		s.logf("journaling failures: %s", strings.Join(parts, ", "))
	}
	switch {
	case jl.failed != nil && survived:
		return fmt.Errorf("the tree's end began because it could not be journaled, and not all of it is confirmed gone (listed above): %w", jl.failed)
	case jl.failed != nil:
		return fmt.Errorf("the tree was ended because it could not be journaled: %w", jl.failed)
	}
	return nil
}

// prepareJournal sets up the reserve and checks the descriptor limit.
func (s *supervisor) prepareJournal(lease *journal.Lease) {
	rs, err := lease.Reserve(reserveSize, reserveMin)
	switch {
	case err == nil:
		s.jl.reserve = rs
	case errors.Is(err, errors.ErrUnsupported) || errors.Is(err, syscall.EOPNOTSUPP):
		// No fallocate here (darwin, some file systems): no reserve,
		// and nothing worth a line on every run.
	default:
		s.logf("no reserve for records (a full disk will make run fail closed sooner): %v", err)
	}
	var lim syscall.Rlimit
	s.jl.watches = 1 << 20
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		if lim.Max != ^uint64(0) && lim.Cur+1 < lim.Max {
			// The runtime did not raise it (see above): say so, since
			// a tree larger than the limit may make run fail closed.
			s.logf("descriptor limit %d (hard %d) was not raised by the runtime", lim.Cur, lim.Max)
		}
		// Half the descriptors, less a margin for the root's own and
		// the publishes, may watch descendants; the rest are journaled
		// without a watcher.
		s.jl.watches = int(min(lim.Cur/2, 1<<20)) - 16
	}
}

// takeWatch reserves a descriptor for a descendant's watcher; false when
// the budget is spent.
func (jl *journalLog) takeWatch() bool {
	jl.mu.Lock()
	defer jl.mu.Unlock()
	if jl.watches <= 0 {
		return false
	}
	jl.watches--
	return true
}

func (jl *journalLog) returnWatch() {
	jl.mu.Lock()
	jl.watches++
	jl.mu.Unlock()
}

// closeJournal releases the reserve's descriptor.
func (s *supervisor) closeJournal() {
	if s.jl.reserve != nil {
		s.jl.reserve.Close()
	}
}

// noSpace reports whether err is the file system being full.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// publish publishes rec (through adm when given, else in an admission of its
// own), releasing the reserve chunk by chunk while the file system is full.
// A failure is counted and logged once as op on what.
func (s *supervisor) publish(adm *journal.Admission, rec *journal.Record, op, what string) error {
	for {
		var err error
		if adm != nil {
			err = adm.Publish(rec)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = s.root.Publish(ctx, rec)
			cancel()
		}
		if err == nil {
			return nil
		}
		if noSpace(err) && s.jl.reserve != nil {
			if n, rerr := s.jl.reserve.Release(reserveChunk); rerr == nil && n > 0 {
				s.logf("root full: released %d bytes of the reserve to %s %s", n, op, what)
				continue
			}
		}
		s.failure(op, what, err)
		return err
	}
}

// retire retires a record, counting and logging a failure once; a record
// already gone is progress.
func (s *supervisor) retire(id string) {
	if err := s.root.Retire(id); err != nil && !errors.Is(err, journal.ErrNotFound) {
		s.failure("retire", "record "+id, err)
	}
}

// track journals one descendant and retires its record when it exits. A
// descendant that exited before it could be journaled is progress; one that
// cannot be journaled makes run fail closed. A handle (pidfd) is only needed
// to notice the exit early: when none can be had, or half the descriptor
// limit is already spent on such handles, the record is published all the
// same and retired when the tree ends (or when its PID is seen reused).
func (s *supervisor) track(id owner.Identity) {
	what := fmt.Sprintf("descendant pid %d", id.PID)
	p, err := owner.Open(id)
	if errors.Is(err, owner.ErrGone) {
		return
	}
	if err != nil {
		s.failure("open a handle on", what, err)
		p = nil
	}
	if p != nil && !s.jl.takeWatch() {
		// Descriptors are short: journal it without a watcher.
		p.Close()
		p = nil
	}
	pg, _ := owner.GroupOf(id.PID)
	t := &tracked{p: p, sub: id, group: pg == id.PID}
	rec := &journal.Record{Kind: journal.KindProcess, Label: strings.TrimSpace(s.label + " descendant"), Subject: &id, Owner: s.self, Phase: journal.PhaseLive}
	if t.group {
		rec.PGID = id.PID
	}
	if err := s.publish(nil, rec, "journal", what); err != nil {
		if p != nil {
			p.Close()
			s.jl.returnWatch()
		}
		if owner.Check(id).State == owner.Dead {
			return // it exited meanwhile: nothing to journal
		}
		s.failClosed(fmt.Errorf("%s cannot be journaled: %w", what, err))
		return
	}
	t.id = rec.ID
	s.mu.Lock()
	s.known[id.PID] = t
	s.mu.Unlock()
	if p == nil {
		return
	}
	go s.watch(t)
}

// watch retires t's record when its pidfd shows the process exited. A wait
// that fails (EMFILE when the descriptors of endTree's handles fill the
// table: the wait duplicates the pidfd) says nothing about the process: it
// is counted and retried, never taken for an exit.
func (s *supervisor) watch(t *tracked) {
	p, pid := t.p, t.sub.PID
	for {
		err := p.Wait(context.Background())
		if err == nil || p.Exited() {
			break
		}
		s.failure("wait on", fmt.Sprintf("descendant pid %d", pid), err)
		time.Sleep(scanInterval)
	}
	reapIfChild(pid)
	s.retire(t.id)
	s.mu.Lock()
	if s.known[pid] == t { // not a newcomer that reused the PID
		delete(s.known, pid)
	}
	s.mu.Unlock()
	p.Close()
	s.jl.returnWatch()
}

// exited reports whether a journaled descendant is verified gone.
func (t *tracked) exited() bool {
	if t.p != nil {
		return t.p.Exited()
	}
	return owner.Check(t.sub).State == owner.Dead
}

// journaled reports whether id, with its start time, is journaled. A record
// whose PID now belongs to another process (a descendant journaled without a
// handle exited, and its PID was reused) is retired here, so the newcomer
// gets a record.
func (s *supervisor) journaled(id owner.Identity) bool {
	s.mu.Lock()
	t, ok := s.known[id.PID]
	var stale *tracked
	if ok && t.sub.StartTime != id.StartTime {
		ok = false
		if t.p == nil {
			delete(s.known, id.PID)
			stale = t
		}
	}
	s.mu.Unlock()
	if stale != nil {
		s.retire(stale.id)
	}
	return ok
}
