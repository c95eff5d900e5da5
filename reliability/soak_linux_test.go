package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

const (
	soakPublishers = 8
	soakRecoverers = 4
)

// soakResult is what a soak child reports when its stdin closes.
type soakResult struct {
	Ops     int      `json:"ops"`     // publishes or recovery passes
	Orphans int      `json:"orphans"` // orphans left (publisher) or ended (recoverer)
	Lost    []string `json:"lost"`    // records of a live owner that vanished
	Errors  []string `json:"errors"`  // anything but ENOENT-as-progress
}

// testSoak runs 8 publishers and 4 orphans-only recoverers on one root for
// -soak. Publishers create subjects through the gate, end and retire some,
// leave orphans (subjects whose recorded owner is dead) and check after
// every step that none of their own records vanished. At the end two
// `recover --all` run at once: the root goes, exactly once.
func testSoak(t *testing.T, e *env) {
	rs := e.newRun(t, "soak", 0)
	j, err := journal.Open(rs.root)
	require.NoError(t, err)
	rootInfo, err := os.Lstat(rs.root)
	require.NoError(t, err)
	j.Close()

	var pubs, recs []*proc
	for i := 0; i < soakPublishers; i++ {
		pubs = append(pubs, e.child(t, "publisher", childOpts{env: tagEnv(rs.tag, "OJ_REL_ROOT="+rs.root), stdin: true}))
	}
	for i := 0; i < soakRecoverers; i++ {
		recs = append(recs, e.child(t, "soakrecov", childOpts{env: tagEnv(rs.tag, "OJ_REL_ROOT="+rs.root, "OJ_REL_TMUX="+e.tmux), stdin: true}))
	}
	for _, p := range append(append([]*proc{}, pubs...), recs...) {
		p.waitReady(t, "started")
	}
	time.Sleep(*flagSoak) // the soak's duration itself, not a wait for an event
	collect := func(ps []*proc, who string) (total soakResult) {
		for _, p := range ps {
			p.stdin.Close()
		}
		for i, p := range ps {
			var r soakResult
			require.NoError(t, json.Unmarshal(p.waitReady(t, "result"), &r))
			require.NoError(t, p.wait(timeout))
			total.Ops += r.Ops
			total.Orphans += r.Orphans
			for _, l := range r.Lost {
				total.Lost = append(total.Lost, fmt.Sprintf("%s %d: %s", who, i, l))
			}
			for _, x := range r.Errors {
				total.Errors = append(total.Errors, fmt.Sprintf("%s %d: %s", who, i, x))
			}
		}
		return total
	}
	// Recoverers first: once the publishers are gone, a recoverer may
	// rightly remove the root.
	rr := collect(recs, "recoverer")
	pr := collect(pubs, "publisher")
	t.Logf("soak %v: %d publishes, %d orphans left, %d recovery passes, %d orphans ended", *flagSoak, pr.Ops, pr.Orphans, rr.Ops, rr.Orphans)
	assert.Empty(t, pr.Lost, "records of live owners lost")
	if errs := append(pr.Errors, rr.Errors...); len(errs) > 0 {
		if len(errs) > 10 {
			errs = append(errs[:10], fmt.Sprintf("... and %d more", len(errs)-10))
		}
		t.Errorf("errors other than ENOENT-as-progress:\n%s", strings.Join(errs, "\n"))
	}
	assert.Positive(t, rr.Orphans, "the recoverers ended orphans")
	fi, err := os.Lstat(rs.root)
	require.NoError(t, err, "the root was removed while its participants lived")
	assert.True(t, os.SameFile(fi, rootInfo), "the root was replaced while its participants lived")

	// The end: two runners at once; the root goes exactly once.
	var wg sync.WaitGroup
	var cliOut string
	var cliCode int
	var rep *recover.Report
	wg.Add(2)
	go func() {
		defer wg.Done()
		cmd := exec.Command(e.cli, "recover", "--root", rs.root, "--all", "--grace", "2s")
		cliOut, cliCode, _ = e.run(cmd)
	}()
	go func() {
		defer wg.Done()
		j, err := journal.Open(rs.root)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("open: %v", err)
			}
			return
		}
		defer j.Close()
		rep, err = recover.Run(context.Background(), j, recover.Options{All: true, Grace: 2 * time.Second, Tmux: e.tmux})
		assert.NoError(t, err)
	}()
	wg.Wait()
	assert.Equal(t, 0, cliCode, "recover --all:\n%s", cliOut)
	if rep != nil {
		assert.True(t, rep.Clean() && rep.RootRemoved, "recover --all: %s", reportText(rep))
	}
	leaked := e.countLeaks(t, rs)
	wrong := e.checkBystanders(t, "soak")
	sum.add(1, leaked+len(pr.Lost), wrong, 0)
}

// stdinClosed returns a channel closed when stdin reaches EOF.
func stdinClosed() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(ch)
	}()
	return ch
}

func reportResult(r *soakResult) int {
	b, _ := json.Marshal(r)
	if err := testroot.Ready("result", b); err != nil {
		return childFail("soak", err)
	}
	return 0
}

// childPublisher creates, ends and orphans subjects on OJ_REL_ROOT until its
// stdin closes, then ends what it owns.
func childPublisher() int {
	r, err := journal.Open(os.Getenv("OJ_REL_ROOT"))
	if err != nil {
		return childFail("publisher", err)
	}
	if _, err := r.Lease(); err != nil {
		return childFail("publisher", err)
	}
	self, err := owner.Self()
	if err != nil {
		return childFail("publisher", err)
	}
	type owned struct {
		rec *journal.Record
		p   *owner.Process
		cmd *exec.Cmd
	}
	var mine []owned
	res := &soakResult{}
	fail := func(what string, err error) { res.Errors = append(res.Errors, what+": "+err.Error()) }
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))
	ctx := context.Background()
	n := 0
	// start starts a sleeping subject leading its own process group, reaped
	// by a goroutine of its own whoever ends it.
	start := func() (*exec.Cmd, owner.Identity, error) {
		cmd := exec.Command("sleep", "100000")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return nil, owner.Identity{}, err
		}
		id, err := owner.Of(cmd.Process.Pid)
		return cmd, id, err
	}
	end := func(o owned) {
		if _, err := recover.Terminate(ctx, o.p, true, time.Second); err != nil {
			fail("terminate", err)
		}
		o.p.Close()
		o.cmd.Wait()
		for _, p := range o.rec.Paths {
			if err := r.Dir().RemoveAll(p); err != nil {
				fail("remove", err)
			}
		}
		if err := r.Retire(o.rec.ID); err != nil {
			if errors.Is(err, journal.ErrNotFound) {
				res.Lost = append(res.Lost, "retire "+o.rec.ID+": "+err.Error())
			} else {
				fail("retire", err)
			}
		}
	}
	check := func() {
		kept := mine[:0]
		for _, o := range mine {
			if _, err := r.Dir().Lstat("records/" + o.rec.ID + ".json"); err != nil {
				res.Lost = append(res.Lost, fmt.Sprintf("%s (subject pid %d): %v", o.rec.ID, o.rec.Subject.PID, err))
				o.p.Close()
				continue
			}
			kept = append(kept, o)
		}
		mine = kept
	}
	if err := testroot.Ready("started", nil); err != nil {
		return childFail("publisher", err)
	}
	stop := stdinClosed()
	for {
		select {
		case <-stop:
			for _, o := range mine {
				end(o)
			}
			return reportResult(res)
		default:
		}
		n++
		switch op := rng.IntN(10); {
		case op < 4 && len(mine) < 6: // create through the gate
			adm, err := r.Admit(ctx)
			if err != nil {
				fail("admit", err)
				continue
			}
			path := fmt.Sprintf("p-%d-%d", os.Getpid(), n)
			rec := &journal.Record{Kind: journal.KindProcess, Label: "soak", Owner: self, Phase: journal.PhaseIntent, Paths: []string{path}}
			if err := adm.Publish(rec); err != nil {
				fail("publish intent", err)
				adm.Done()
				continue
			}
			if err := scratch(r, path); err != nil {
				fail("scratch", err)
			}
			cmd, id, err := start()
			if err != nil {
				fail("start", err)
				adm.Done()
				continue
			}
			p, err := owner.Open(id)
			if err != nil {
				fail("open", err)
				adm.Done()
				continue
			}
			rec.Subject, rec.PGID, rec.Phase = &id, id.PID, journal.PhaseLive
			if err := adm.Publish(rec); err != nil {
				fail("publish live", err)
			}
			adm.Done()
			mine = append(mine, owned{rec, p, cmd})
			res.Ops++
		case op < 7 && len(mine) > 0: // end one of ours
			i := rng.IntN(len(mine))
			o := mine[i]
			mine = append(mine[:i], mine[i+1:]...)
			end(o)
		case op < 9: // leave an orphan: its recorded owner is dead
			dc := exec.Command("sleep", "100000")
			if err := dc.Start(); err != nil {
				fail("start", err)
				continue
			}
			dead, err := owner.Of(dc.Process.Pid)
			dc.Process.Kill()
			dc.Wait()
			if err != nil {
				fail("owner", err)
				continue
			}
			cmd, id, err := start()
			if err != nil {
				fail("start", err)
				continue
			}
			go cmd.Wait()
			path := fmt.Sprintf("o-%d-%d", os.Getpid(), n)
			if err := scratch(r, path); err != nil {
				fail("scratch", err)
			}
			if err := r.Publish(ctx, &journal.Record{Kind: journal.KindProcess, Label: "soak orphan", Subject: &id, PGID: id.PID,
				Owner: dead, Paths: []string{path}, Phase: journal.PhaseLive}); err != nil {
				fail("publish orphan", err)
			}
			res.Orphans++
			res.Ops++
		}
		check()
	}
}

// childSoakRecoverer replays OJ_REL_ROOT, orphans only, until its stdin
// closes.
func childSoakRecoverer() int {
	r, err := journal.Open(os.Getenv("OJ_REL_ROOT"))
	if err != nil {
		return childFail("recoverer", err)
	}
	res := &soakResult{}
	if err := testroot.Ready("started", nil); err != nil {
		return childFail("recoverer", err)
	}
	stop := stdinClosed()
	for {
		select {
		case <-stop:
			return reportResult(res)
		default:
		}
		rep, err := recover.Run(context.Background(), r, recover.Options{Grace: time.Second, Tmux: os.Getenv("OJ_REL_TMUX")})
		res.Ops++
		if err != nil {
			res.Errors = append(res.Errors, err.Error())
			continue
		}
		if rep.RootRemoved {
			res.Errors = append(res.Errors, "the root was removed while its participants lived")
		}
		if rep.Retained > 0 {
			res.Errors = append(res.Errors, "retained: "+strings.ReplaceAll(reportText(rep), "\n", " | "))
		}
		for _, p := range rep.Problems {
			res.Errors = append(res.Errors, "problem: "+p)
		}
		for _, a := range rep.Actions {
			if a.Verdict == recover.InUse && len(a.Done) > 0 {
				res.Errors = append(res.Errors, fmt.Sprintf("acted on an in-use record %s: %v", a.ID, a.Done))
			}
			if a.Verdict == recover.Orphan && a.Retained == "" {
				res.Orphans++
			}
		}
		if len(res.Errors) > 50 {
			res.Errors = res.Errors[:50]
		}
	}
}
