package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ownerjournal/ownerjournal/bench/internal/benchkit"
	"github.com/ownerjournal/ownerjournal/owner"
)

//go:embed tree.sh
var treeScript string

const treeSize = 50

// member is one process of the tree, watched through a pidfd.
type member struct {
	id      owner.Identity
	p       *owner.Process
	escaped bool
	gone    chan struct{}
	goneAt  time.Time
}

// tree is a started 50-process tree.
type tree struct {
	members []*member
}

// readTree reads the members' PIDs from the tree's stdout, opens a pidfd on
// each and starts a watcher that notes when it exits.
func readTree(stdout io.Reader) (*tree, error) {
	t := &tree{}
	sc := bufio.NewScanner(stdout)
	escaped := 0
	for len(t.members) < treeSize && sc.Scan() {
		line := sc.Text()
		esc := false
		if rest, ok := strings.CutPrefix(line, "escaped "); ok {
			line, esc = rest, true
			escaped++
		}
		pid, err := strconv.Atoi(line)
		if err != nil {
			t.kill()
			return nil, fmt.Errorf("tree printed %q", sc.Text())
		}
		id, err := owner.Of(pid)
		if err != nil {
			t.kill()
			return nil, fmt.Errorf("tree member %d: %w", pid, err)
		}
		p, err := owner.Open(id)
		if err != nil {
			t.kill()
			return nil, fmt.Errorf("tree member %d: %w", pid, err)
		}
		m := &member{id: id, p: p, escaped: esc, gone: make(chan struct{})}
		go func() {
			p.Wait(context.Background())
			m.goneAt = time.Now()
			close(m.gone)
		}()
		t.members = append(t.members, m)
	}
	if len(t.members) != treeSize || escaped != 1 {
		t.kill()
		return nil, fmt.Errorf("tree reported %d members (%d escaped), want %d (1)", len(t.members), escaped, treeSize)
	}
	return t, nil
}

// settle waits up to d for every member to exit and returns how many are
// still alive and when the last one that exited did.
func (t *tree) settle(d time.Duration) (left int, last time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for _, m := range t.members {
		select {
		case <-m.gone:
		case <-ctx.Done():
		}
	}
	for _, m := range t.members {
		select {
		case <-m.gone:
			if m.goneAt.After(last) {
				last = m.goneAt
			}
		default:
			left++
		}
	}
	return left, last
}

// kill ends every member still alive through its pidfd and waits for it.
func (t *tree) kill() {
	for _, m := range t.members {
		m.p.Signal(syscall.SIGKILL)
	}
	for _, m := range t.members {
		select {
		case <-m.gone:
		case <-time.After(5 * time.Second):
		}
		m.p.Close()
	}
}

// tree-kill-ratio: our wall time to end a 50-process tree (one member
// double-forked and re-parented) and confirm every member gone ÷ npm
// tree-kill's wall time on the same tree, measured until every member it
// ends is gone.
//
// Ours is what a user runs: `ownerjournal run -- CMD` supervising the tree,
// told to stop with SIGTERM (as a test runner or a shell's kill does). Its
// time runs from the SIGTERM until the supervisor has exited (it exits only
// after confirming the tree ended) and every member is gone.
func (d *driver) treeKill() error {
	const rounds, theirRounds = 7, 5
	var ours, theirs, cpus []time.Duration
	var oursLeft, theirsLeft []int
	for round := 0; round < rounds; round++ {
		w, cpu, left, err := d.treeOurs()
		if err != nil {
			return err
		}
		ours, oursLeft, cpus = append(ours, w), append(oursLeft, left), append(cpus, cpu)
		if round < theirRounds {
			w, left, err := d.treeTheirs()
			if err != nil {
				return err
			}
			theirs, theirsLeft = append(theirs, w), append(theirsLeft, left)
		}
	}
	mo, mt := benchkit.Median(ours), benchkit.Median(theirs)
	report("tree-kill-ratio", ratio(mo, mt), "ours (`ownerjournal run` told to stop) %s, left alive %v, supervisor CPU %s; npm tree-kill %s, left alive %v; medians of %d and %d",
		ms(mo), oursLeft, ms(benchkit.Median(cpus)), ms(mt), theirsLeft, len(ours), len(theirs))
	report("tree-kill-left-alive-ours", strconv.Itoa(maxInt(oursLeft)), "members of %d left alive, worst round", treeSize)
	report("tree-kill-left-alive-npm", strconv.Itoa(maxInt(theirsLeft)), "members of %d left alive by npm tree-kill, worst round (the re-parented one)", treeSize)
	return nil
}

func maxInt(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// treeOurs runs the tree under `ownerjournal run`, stops it, and returns the
// wall time, the supervisor's whole CPU time and how many members were left
// alive.
func (d *driver) treeOurs() (wall, cpu time.Duration, left int, err error) {
	r, err := d.privateRoot()
	if err != nil {
		return 0, 0, 0, err
	}
	var errb bytes.Buffer
	cmd := exec.Command(d.oj, "run", "--root", r.Path(), "--grace", benchGrace.String(), "--label", "tree", "--", "sh", "-c", treeScript)
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, err
	}
	exited := make(chan time.Time, 1)
	t, err := readTree(stdout)
	if err != nil {
		// The supervisor ends whatever of the tree exists.
		cmd.Process.Signal(syscall.SIGTERM)
		go io.Copy(io.Discard, stdout)
		cmd.Wait()
		return 0, 0, 0, err
	}
	defer t.kill()
	go func() {
		io.Copy(io.Discard, stdout)
		cmd.Wait()
		exited <- time.Now()
	}()
	// A run that has been going for a while: the supervisor has scanned
	// (and journaled) its descendants.
	time.Sleep(300 * time.Millisecond)
	t0 := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, 0, 0, err
	}
	var t1 time.Time
	select {
	case t1 = <-exited:
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	case <-time.After(10 * time.Second):
		return 0, 0, 0, fmt.Errorf("ownerjournal run did not exit 10 s after SIGTERM: %s", errb.Bytes())
	}
	left, last := t.settle(0)
	if last.After(t1) {
		t1 = last
	}
	if left > 0 {
		logf("ownerjournal run left %d members alive: %s", left, lastLines(errb.Bytes(), 5))
	}
	scan, err := r.Scan()
	if err != nil {
		return 0, 0, 0, err
	}
	if len(scan.Records) != 0 {
		logf("ownerjournal run left %d records in its root", len(scan.Records))
	}
	return t1.Sub(t0), cpu, left, nil
}

// treeTheirs starts the same tree, then has npm tree-kill end it from its
// root, and returns the wall time until every member it ended is gone and
// how many members it left alive (those are then ended here).
func (d *driver) treeTheirs() (time.Duration, int, error) {
	cmd := exec.Command("sh", "-c", treeScript)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	var reaped sync.WaitGroup
	reaped.Add(1)
	t, err := readTree(stdout)
	if err != nil {
		// Members not read yet are in the tree's process group (but for
		// the escaped one, which readTree has read unless the tree broke
		// before printing it).
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		go io.Copy(io.Discard, stdout)
		cmd.Wait()
		return 0, 0, err
	}
	go func() {
		defer reaped.Done()
		io.Copy(io.Discard, stdout)
		cmd.Wait()
	}()
	defer func() { t.kill(); reaped.Wait() }()

	node := exec.Command("node", filepath.Join(d.nodeDir, "treekill.js"), strconv.Itoa(cmd.Process.Pid))
	node.Dir = d.nodeDir
	node.Stderr = os.Stderr
	nin, err := node.StdinPipe()
	if err != nil {
		return 0, 0, err
	}
	nout, err := node.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	if err := node.Start(); err != nil {
		return 0, 0, err
	}
	defer func() { nin.Close(); node.Process.Kill(); node.Wait() }()
	sc := bufio.NewScanner(nout)
	if !sc.Scan() || sc.Text() != "ready" {
		return 0, 0, fmt.Errorf("treekill.js did not get ready")
	}
	t0 := time.Now()
	if _, err := io.WriteString(nin, "go\n"); err != nil {
		return 0, 0, err
	}
	if !sc.Scan() {
		return 0, 0, fmt.Errorf("treekill.js did not call back")
	}
	cb := time.Now()
	var res struct {
		MS  float64 `json:"ms"`
		Err *string `json:"err"`
	}
	if err := json.Unmarshal(sc.Bytes(), &res); err != nil {
		return 0, 0, fmt.Errorf("treekill.js printed %q", sc.Text())
	}
	if res.Err != nil {
		return 0, 0, fmt.Errorf("tree-kill: %s", *res.Err)
	}
	// Whatever tree-kill signalled dies within milliseconds of the
	// callback; what is alive half a second later it left alive.
	left, last := t.settle(500 * time.Millisecond)
	end := cb
	if last.After(end) {
		end = last
	}
	return end.Sub(t0), left, nil
}
