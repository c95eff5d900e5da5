package recover

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ownerjournal/ownerjournal/internal/safetext"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// DefaultGrace is the grace period between SIGTERM and SIGKILL.
const DefaultGrace = 5 * time.Second

// DefaultWait is how long a teardown waits for admitted creators.
const DefaultWait = time.Minute

// Options controls a recovery.
type Options struct {
	// All also ends what is in use (owner alive): the runner ending the
	// run. It marks the root closing and waits for admitted creators first.
	All bool
	// Grace between SIGTERM and SIGKILL, and the bound on each wait for an
	// exit. Zero means DefaultGrace.
	Grace time.Duration
	// Wait bounds how long All waits for admitted creators to finish before
	// it gives up (and retains the root). Zero means DefaultWait.
	Wait time.Duration
	// DryRun classifies and plans; it changes nothing.
	DryRun bool
	// KeepRoot never removes the root (a daemon recovering its own root).
	KeepRoot bool
	// Tmux is the tmux binary used for kill-server; empty means "tmux"
	// looked up on a fixed PATH.
	Tmux string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// Action is what recovery did (or, in a dry run, would do) to one record.
type Action struct {
	ID       string        `json:"id,omitempty"`
	Path     string        `json:"path"`
	Kind     string        `json:"kind,omitempty"`
	Label    string        `json:"label,omitempty"`
	Verdict  Verdict       `json:"verdict"`
	Reason   string        `json:"reason"`
	Done     []string      `json:"done,omitempty"`
	Retained string        `json:"retained,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// Report is the outcome of Run.
type Report struct {
	Root        string   `json:"root"`
	Mode        string   `json:"mode"`
	DryRun      bool     `json:"dry_run,omitempty"`
	Actions     []Action `json:"records"`
	Temps       []string `json:"temps_removed,omitempty"`
	Problems    []string `json:"problems,omitempty"`
	RootRemoved bool     `json:"root_removed"`
	RootKept    string   `json:"root_kept,omitempty"`
	// RootMissing: there was no root to recover (reported only when the
	// caller allows it, `recover --missing-ok`); nothing was removed.
	RootMissing bool `json:"root_missing,omitempty"`
	// Retained counts what should be gone but is not: unknown or corrupt
	// records, unconfirmed kills, undeletable resources, and in All mode a
	// root that could not be removed.
	Retained int           `json:"retained"`
	Elapsed  time.Duration `json:"elapsed_ns"`
}

// Clean reports whether everything that should be gone is verified gone.
func (r *Report) Clean() bool { return r.Retained == 0 }

// Run replays the journal of root as opts says and returns a report. An
// error is returned only when recovery could not run at all (an unreadable
// root); everything else is in the report. With All, the calling process's
// own lease on root is released so that the root can go.
func Run(ctx context.Context, root *journal.Root, opts Options) (*Report, error) {
	start := time.Now()
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.Wait <= 0 {
		opts.Wait = DefaultWait
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	// The whole recovery is bounded (see Options.Deadline); a caller's
	// cancel still ends it sooner.
	ctx, cancelDeadline := withDeadline(ctx, opts.Deadline())
	defer cancelDeadline()
	rep := &Report{Root: root.Path(), Mode: "orphans", DryRun: opts.DryRun}
	if opts.All {
		rep.Mode = "all"
	}
	var excl *journal.Exclusive
	if opts.All && !opts.DryRun {
		if err := root.MarkClosing(); err != nil {
			if !unwritable(err) {
				return nil, err
			}
			// A read-only or full root cannot take the marker; the
			// teardown must not need a write before it acts.
			rep.Problems = append(rep.Problems, markerProblem(err))
		}
		if err := root.ReleaseLease(); err != nil {
			rep.Problems = append(rep.Problems, err.Error())
		}
		lctx, cancel := context.WithTimeout(ctx, opts.Wait)
		x, err := root.LockExclusive(lctx)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			// An admitted creator still holds the root. Ending anything
			// without the exclusive lock would let it create after the
			// scan: keep the root (still closing) and say so.
			rep.RootKept = fmt.Sprintf("admitted creators still hold %s after %v; nothing was ended (the root stays closing, run recover --all again)", root.Path(), opts.Wait)
			rep.Retained++
			rep.Elapsed = time.Since(start)
			return rep, nil
		}
		if errors.Is(err, journal.ErrClosing) && root.Removed() {
			// Another recoverer finished and removed the root: progress.
			rep.RootRemoved = true
			rep.RootKept = ""
			rep.Elapsed = time.Since(start)
			return rep, nil
		}
		if err != nil {
			return nil, err
		}
		excl = x
		defer excl.Unlock()
	}
	r := &run{root: root, opts: opts, rep: rep}
	// Ending an orphan can orphan what it owned: a server killed as the
	// subject of its dead supervisor's record leaves its own tmux records
	// with a dead owner. Orphans-only recovery replays again while a pass
	// ended something and records stayed in use (at most maxPasses).
	for i := 1; ; i++ {
		acted, inUse, err := r.pass(ctx)
		if err != nil {
			if root.Removed() {
				// Another recoverer removed the root after it was
				// opened (the scan of a removed directory fails with
				// ENOENT): progress, nothing is left to do.
				rep.RootRemoved = true
				rep.Elapsed = time.Since(start)
				return rep, nil
			}
			return nil, err
		}
		if opts.All || opts.DryRun || acted == 0 || inUse == 0 || i == maxPasses || ctx.Err() != nil {
			break
		}
	}
	sortActions(rep.Actions)
	for _, a := range rep.Actions {
		if a.Retained != "" {
			rep.Retained++
		}
	}
	if why := overdue(ctx); why != "" && rep.Retained > 0 {
		rep.Problems = append(rep.Problems, why+"; what was not verified gone by then is retained")
	}
	if !opts.DryRun {
		r.finish(ctx, excl)
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// stageHook is a test seam, called at the marked points of [Run] so that a
// crash test can SIGKILL a recoverer half-way and check that the next one
// finishes: "classified" (every record classified, nothing done yet),
// "signalled" (one record's subject ended, before its sockets, paths and
// retirement; called concurrently), "retired" (every record handled, before
// temp files and the root) and "removing" (under the exclusive lock, just
// before the root is removed). It must not be set outside tests.
var stageHook = func(stage string) {}

type run struct {
	root      *journal.Root
	opts      Options
	rep       *Report
	socks     *socketTable // the sockets of the current pass, each handled once
	mu        sync.Mutex
	tempsDone bool // temp files are judged once, by the first pass
}

// logf writes one log line; every string argument is quoted when it holds
// anything unsafe for a terminal (labels and reasons come from records).
func (r *run) logf(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.opts.Log, format+"\n", safetext.Args(a)...)
}

// pass classifies every record and acts on those the mode allows, all in
// parallel.
func (r *run) pass(ctx context.Context) (acted, inUse int, err error) {
	st, err := Classify(r.root)
	if err != nil {
		return 0, 0, err
	}
	r.socks = newSocketTable(r.root)
	defer r.socks.close()
	stageHook("classified")
	actions := make([]Action, len(st.Entries))
	var act []int
	for i, e := range st.Entries {
		a := &actions[i]
		*a = Action{Path: e.Path, Verdict: e.Verdict, Reason: e.Reason}
		if e.Record != nil {
			a.ID, a.Kind, a.Label = e.Record.ID, string(e.Record.Kind), e.Record.Label
		}
		switch {
		case e.Verdict == Corrupt:
			a.Retained = "corrupt record: " + e.Reason
		case e.Verdict == Unknown:
			a.Retained = "cannot be verified: " + e.Reason
		case e.Verdict == InUse && !r.opts.All:
		default:
			act = append(act, i)
		}
	}
	// Phase 1: every process, tmux server and cgroup ends, all records at
	// once. Phase 2 starts only when phase 1 is over everywhere, so no
	// record's directory or socket is removed while another record's
	// process may still be using it on its way out.
	t0 := time.Now()
	var running []int // records with something that may run
	for _, i := range act {
		if e := st.Entries[i]; e.SubjectAlive || e.Record.Cgroup != "" || e.Record.Kind == journal.KindTmux || r.opts.DryRun {
			running = append(running, i)
		}
	}
	r.parallel(running, func(i int) {
		r.endProcesses(ctx, st.Entries[i], &actions[i])
		markOverdue(ctx, &actions[i])
		actions[i].Duration = time.Since(t0)
	})
	if !r.opts.DryRun && len(act) > 0 {
		stageHook("signalled")
	}
	// What a record that stays names must stay too, even inside a path
	// another record names.
	var keep []string
	for i, e := range st.Entries {
		if e.Record != nil && (actions[i].Retained != "" || (e.Verdict == InUse && !r.opts.All)) {
			keep = append(keep, e.Record.Sockets...)
			keep = append(keep, e.Record.Paths...)
		}
	}
	r.parallel(act, func(i int) {
		t1 := time.Now()
		r.endResources(ctx, st.Entries[i], &actions[i], keep)
		markOverdue(ctx, &actions[i])
		actions[i].Duration += time.Since(t1)
	})
	if !r.opts.DryRun {
		stageHook("retired")
	}
	// A record seen again replaces what an earlier pass said of it.
	at := map[string]int{}
	for i, a := range r.rep.Actions {
		at[a.Path] = i
	}
	for _, a := range actions {
		if i, ok := at[a.Path]; ok {
			r.rep.Actions[i] = a
		} else {
			r.rep.Actions = append(r.rep.Actions, a)
		}
	}
	if !r.tempsDone {
		r.tempsDone = true
		r.cleanTemps(st.Scan)
	}
	for _, i := range act {
		if actions[i].Retained == "" {
			acted++
		}
	}
	for _, e := range st.Entries {
		if e.Verdict == InUse {
			inUse++
		}
	}
	return acted, inUse, nil
}

// maxPasses bounds the replays of one orphans-only recovery.
const maxPasses = 4

// parallel runs fn for every index at once, at most 512 at a time, and
// fewer when descriptors are short ([fdSlots]).
func (r *run) parallel(idx []int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, fdSlots(512))
	for _, i := range idx {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}

// endProcesses ends what runs for one record: its tmux servers, its subject
// (and group), then its cgroup. What cannot be confirmed is retained.
func (r *run) endProcesses(ctx context.Context, e Entry, a *Action) {
	rec := e.Record
	did := func(s string) { a.Done = append(a.Done, s) }
	if r.opts.DryRun {
		if e.SubjectAlive {
			did(fmt.Sprintf("would terminate %v", rec.Subject))
		}
		if rec.Cgroup != "" {
			did("would kill cgroup " + rec.Cgroup)
		}
		return
	}
	if why := overdue(ctx); why != "" {
		a.Retained = why + ": nothing was ended"
		return
	}
	var retained []string
	if rec.Kind == journal.KindTmux {
		done, failed := r.stopTmuxAll(ctx, rec.Sockets, rec.Subject)
		a.Done = append(a.Done, done...)
		retained = append(retained, failed...)
	}
	if rec.Subject != nil && e.SubjectAlive {
		msgs, err := terminate(ctx, *rec.Subject, rec.PGID != 0, r.opts.Grace)
		a.Done = append(a.Done, msgs...)
		if err != nil {
			retained = append(retained, err.Error())
		}
	}
	// The cgroup goes after the subject had its grace period: it catches
	// every member the journal does not name (setsid daemons included).
	if rec.Cgroup != "" {
		if msg, err := endCgroup(ctx, rec.Cgroup, rec.CgroupID, r.opts.Grace); err != nil {
			retained = append(retained, err.Error())
		} else if msg != "" {
			did(msg)
		}
	}
	if len(retained) > 0 {
		a.Retained = joinReasons(retained)
	}
}

// endResources unlinks one record's sockets once nothing answers on them,
// removes its paths deepest first, and retires it; a record whose processes
// were retained keeps everything, and so does a path that holds what a
// staying record names (keep).
func (r *run) endResources(ctx context.Context, e Entry, a *Action, keep []string) {
	rec := e.Record
	did := func(s string) { a.Done = append(a.Done, s) }
	if r.opts.DryRun {
		for _, s := range unique(rec.Sockets) {
			did("would stop and unlink socket " + s)
		}
		for _, p := range rec.Paths {
			did("would remove " + p)
		}
		did("would retire")
		return
	}
	if a.Retained != "" {
		r.logf("ownerjournal: retained %s: %s", rec.ID, a.Retained)
		return
	}
	var retained []string
	if rec.PGID != 0 && !e.SubjectAlive {
		// The leader died before recovery could hold its pidfd, and a
		// group cannot be signalled safely without it (invariant 5). If
		// members no record named still live, the record and its root
		// stay: a kept root is recoverable later, a removed one is not.
		if alive, err := owner.GroupAliveOf(*rec.Subject); err != nil || alive {
			a.Retained = fmt.Sprintf("leader pid %d is dead but its process group %d still has live members (or cannot be read)", rec.Subject.PID, rec.PGID)
			r.logf("ownerjournal: retained %s: %s", rec.ID, a.Retained)
			return
		}
	}
	if why := overdue(ctx); why != "" {
		a.Retained = why + ": sockets and paths not removed"
		r.logf("ownerjournal: retained %s: %s", rec.ID, a.Retained)
		return
	}
	for _, s := range unique(rec.Sockets) {
		if overdue(ctx) != "" {
			retained = append(retained, "socket "+s+" not checked")
			continue
		}
		if k := heldBy(s, keep); k != "" {
			retained = append(retained, fmt.Sprintf("socket %s is also named by a record that stays", s))
			continue
		}
		if msg, err := r.unlinkSocket(ctx, s); err != nil {
			retained = append(retained, err.Error())
		} else if msg != "" {
			did(msg)
		}
	}
	paths := append([]string(nil), rec.Paths...)
	// Deepest first: a nested recorded path goes before its parent.
	sort.SliceStable(paths, func(i, j int) bool { return depth(paths[i]) > depth(paths[j]) })
	for _, p := range paths {
		if k := heldBy(p, keep); k != "" {
			retained = append(retained, fmt.Sprintf("%s holds %s, named by a record that stays", p, k))
			continue
		}
		if err := removeTree(r.root, p); err != nil {
			retained = append(retained, err.Error())
		} else {
			did("removed " + p)
		}
	}
	if len(retained) > 0 {
		a.Retained = joinReasons(retained)
		r.logf("ownerjournal: retained %s: %s", rec.ID, a.Retained)
		return
	}
	if err := r.root.Retire(rec.ID); err != nil && !errors.Is(err, journal.ErrNotFound) {
		a.Retained = err.Error()
		return
	}
	did("retired")
	label := ""
	if rec.Label != "" {
		label = " (" + rec.Label + ")"
	}
	r.logf("ownerjournal: %s %s%s: %s", e.Verdict, rec.ID, label, joinReasons(a.Done))
}

// heldBy returns the first entry of keep that is p or lies inside p.
func heldBy(p string, keep []string) string {
	for _, k := range keep {
		if k == p || strings.HasPrefix(k, p+"/") {
			return k
		}
	}
	return ""
}

// cleanTemps removes temp files whose writer is verified dead.
func (r *run) cleanTemps(scan *journal.Scan) {
	for _, t := range scan.Temps {
		cur, err := owner.Of(t.Writer.PID)
		switch {
		case err == nil && cur.StartTime == t.Writer.StartTime:
			continue // writer alive: a publish in progress
		case err != nil && !errors.Is(err, owner.ErrGone):
			r.rep.Retained++
			r.rep.Problems = append(r.rep.Problems, fmt.Sprintf("temp file %s: writer cannot be verified: %v", t.Name, err))
			continue
		}
		// The name does not say in which PID namespace the writer runs:
		// one below ours (a container's) may be publishing right now.
		if alive, err := owner.LiveElsewhere(t.Writer.PID, t.Writer.StartTime); err != nil || alive {
			if err != nil {
				r.rep.Retained++
				r.rep.Problems = append(r.rep.Problems, fmt.Sprintf("temp file %s: writer cannot be verified: %v", t.Name, err))
			}
			continue
		}
		if r.opts.DryRun {
			r.rep.Temps = append(r.rep.Temps, "would remove "+t.Name)
			continue
		}
		if err := r.root.RemoveTemp(t); err != nil {
			r.rep.Retained++
			r.rep.Problems = append(r.rep.Problems, err.Error())
			continue
		}
		r.rep.Temps = append(r.rep.Temps, t.Name)
	}
}

// finish removes free leases and, unless told to keep it, the root.
func (r *run) finish(ctx context.Context, excl *journal.Exclusive) {
	rep := r.rep
	if r.opts.All {
		r.awaitParticipants(ctx)
	}
	if r.opts.KeepRoot {
		rep.RootKept = "kept as asked (--keep-root)"
		if excl != nil {
			// The teardown is over and the root stays: admit again.
			if err := excl.Reopen(); err != nil {
				rep.Problems = append(rep.Problems, err.Error())
				rep.Retained++
			}
		}
		return
	}
	if excl == nil && r.root.HoldsLease() {
		// The caller's own root (a daemon recovering at start-up):
		// removing it would pull it from under its holder.
		rep.RootKept = "this process holds its lease on the root"
		return
	}
	if excl == nil {
		x, err := r.root.TryLockExclusive()
		switch {
		case errors.Is(err, journal.ErrClosing) && r.root.Removed():
			rep.RootRemoved = true
			return
		case err != nil:
			rep.RootKept = err.Error()
			rep.Problems = append(rep.Problems, err.Error())
			rep.Retained++
			return
		case x == nil:
			rep.RootKept = "in use: a participant holds an admission"
			return
		}
		defer x.Unlock()
		excl = x
	}
	stageHook("removing")
	err := excl.RemoveRoot()
	switch {
	case err == nil:
		rep.RootRemoved = true
		r.logf("ownerjournal: removed root %s", rep.Root)
	case errors.Is(err, journal.ErrInUse) && !r.opts.All:
		rep.RootKept = err.Error()
	default:
		rep.RootKept = err.Error()
		rep.Retained++
	}
}

// awaitParticipants waits, up to the grace period, for participants that
// still hold a lease (a supervisor retiring what it owned) to exit.
func (r *run) awaitParticipants(ctx context.Context) {
	scan, err := r.root.Scan()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.Grace)
	defer cancel()
	var wg sync.WaitGroup
	for _, l := range scan.Leases {
		if ls, err := r.root.LeaseOf(l.Participant); err != nil || ls != journal.LeaseHeld {
			continue
		}
		id, err := owner.Of(l.Participant.PID)
		if err != nil || id.StartTime != l.Participant.StartTime {
			continue
		}
		p, err := owner.Open(id)
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer p.Close()
			p.Wait(ctx)
		}()
	}
	wg.Wait()
}

func joinReasons(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "; "
		}
		out += x
	}
	return out
}
