package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ownerjournal/ownerjournal/bench/internal/benchkit"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// helperEnv selects a helper mode when the driver re-executes itself.
const helperEnv = "OJBENCH_HELPER"

func runHelper(mode string, args []string) int {
	var err error
	switch mode {
	case "publish":
		err = helperPublish(args)
	case "orphans":
		err = helperOrphans(args)
	default:
		err = fmt.Errorf("unknown helper %q", mode)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchdriver helper %s: %v\n", mode, err)
		return 1
	}
	return 0
}

// helperPublish opens the root (or, with -floor, the plain directory),
// prints "ready", waits for one line on stdin, publishes -n records (or
// floor-writes as many), prints "done" and then every record file name.
func helperPublish(args []string) error {
	f := flag.NewFlagSet("publish", flag.ContinueOnError)
	root := f.String("root", "", "root (or, with -floor, a directory)")
	n := f.Int("n", 500, "records to publish")
	floor := f.Bool("floor", false, "write the floor instead: renameio.WriteFile + directory fsync")
	if err := f.Parse(args); err != nil {
		return err
	}
	self, err := owner.Self()
	if err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	in := bufio.NewReader(os.Stdin)
	names := make([]string, 0, *n)
	var publish func(i int) error
	if *floor {
		d, err := os.Open(*root)
		if err != nil {
			return err
		}
		defer d.Close()
		publish = func(i int) error {
			rec := benchkit.Record(self, self, i)
			b, err := rec.Encode()
			if err != nil {
				return err
			}
			names = append(names, rec.ID+".json")
			return benchkit.FloorPublish(*root, d, rec.ID+".json", b)
		}
	} else {
		r, err := journal.Open(*root)
		if err != nil {
			return err
		}
		defer r.Close()
		ctx := context.Background()
		publish = func(i int) error {
			rec := benchkit.Record(self, self, i)
			names = append(names, rec.ID+".json")
			return r.Publish(ctx, rec)
		}
	}
	fmt.Fprintln(out, "ready")
	out.Flush()
	if _, err := in.ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for go: %w", err)
	}
	for i := 0; i < *n; i++ {
		if err := publish(i); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "done")
	out.Flush()
	for _, name := range names {
		fmt.Fprintln(out, name)
	}
	return out.Flush()
}

// helperOrphans is the owner that dies: it takes its lease on the root,
// starts -n sleepers (the last -ignore of them with SIGTERM ignored, each in
// a process group of its own with -group), publishes one record per sleeper
// with itself as owner, prints each sleeper's identity as a JSON line and
// "ready", then blocks until it is killed.
func helperOrphans(args []string) error {
	f := flag.NewFlagSet("orphans", flag.ContinueOnError)
	root := f.String("root", "", "root")
	n := f.Int("n", 20, "sleepers")
	ignore := f.Int("ignore", 0, "how many of them ignore SIGTERM")
	group := f.Bool("group", false, "each sleeper leads a process group of its own")
	if err := f.Parse(args); err != nil {
		return err
	}
	r, err := journal.Open(*root)
	if err != nil {
		return err
	}
	if _, err := r.Lease(); err != nil {
		return err
	}
	self, err := owner.Self()
	if err != nil {
		return err
	}
	ctx := context.Background()
	out := bufio.NewWriter(os.Stdout)
	for i := 0; i < *n; i++ {
		if i == *n-*ignore {
			// SIG_IGN survives exec: the sleepers started from here on
			// ignore SIGTERM.
			signal.Ignore(syscall.SIGTERM)
		}
		cmd := exec.Command("sleep", "1000")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: *group}
		if err := cmd.Start(); err != nil {
			return err
		}
		id, err := owner.Of(cmd.Process.Pid)
		if err != nil {
			return err
		}
		rec := &journal.Record{Kind: journal.KindProcess, Label: fmt.Sprintf("orphan %d", i), Subject: &id, Owner: self, Phase: journal.PhaseLive}
		if *group {
			rec.PGID = id.PID
		}
		if err := r.Publish(ctx, rec); err != nil {
			cmd.Process.Kill()
			return err
		}
		b, _ := json.Marshal(id)
		fmt.Fprintf(out, "%s\n", b)
	}
	fmt.Fprintln(out, "ready")
	out.Flush()
	// Until SIGKILL (or until the driver goes away).
	io.Copy(io.Discard, os.Stdin)
	return nil
}

// orphans starts an orphans helper on root, reads the sleepers' identities,
// and SIGKILLs the helper: the sleepers are live orphans whose owner is
// verified dead (its lease is free). They are ended after the figure if
// anything survives it.
func (d *driver) orphans(root string, n, ignore int, group bool) ([]owner.Identity, error) {
	cmd := exec.Command(d.self, "-root", root, fmt.Sprint("-n=", n), fmt.Sprint("-ignore=", ignore), fmt.Sprint("-group=", group))
	cmd.Env = append(os.Environ(), helperEnv+"=orphans")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var ids []owner.Identity
	defer func() {
		// Whatever happens below, the sleepers must not outlive the figure.
		d.defer_(func() { killAll(ids) })
	}()
	sc := bufio.NewScanner(stdout)
	ready := false
	for sc.Scan() {
		if sc.Text() == "ready" {
			ready = true
			break
		}
		var id owner.Identity
		if err := json.Unmarshal(sc.Bytes(), &id); err != nil {
			break
		}
		ids = append(ids, id)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if !ready || len(ids) != n {
		return ids, fmt.Errorf("orphans helper reported %d of %d sleepers", len(ids), n)
	}
	return ids, nil
}

// killAll ends, through verified handles, every identity still alive and
// waits for each to exit.
func killAll(ids []owner.Identity) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, id := range ids {
		p, err := owner.Open(id)
		if err != nil {
			continue
		}
		p.Signal(syscall.SIGKILL)
		p.Wait(ctx)
		p.Close()
	}
}

// alive counts the identities that still run (zombies are dead).
func alive(ids []owner.Identity) int {
	n := 0
	for _, id := range ids {
		if owner.Check(id).State == owner.Alive {
			n++
		}
	}
	return n
}

// privateRoot makes an open root removed after the figure.
func (d *driver) privateRoot() (*journal.Root, error) {
	r, err := benchkit.NewRoot()
	if err != nil {
		return nil, err
	}
	path := r.Path()
	d.defer_(func() { r.Close(); os.RemoveAll(path) })
	return r, nil
}

// privateDir makes a private directory removed after the figure.
func (d *driver) privateDir() (string, error) {
	p, err := benchkit.PrivateDir()
	if err != nil {
		return "", err
	}
	d.defer_(func() { os.RemoveAll(p) })
	return p, nil
}

// publishers runs 8 publish helpers at once, released together, and returns
// the wall time from the release to the last "done" and every record file
// name they wrote.
func (d *driver) publishers(dir string, procs, n int, floor bool) (time.Duration, []string, error) {
	type proc struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		sc    *bufio.Scanner
	}
	ps := make([]*proc, procs)
	defer func() {
		for _, p := range ps {
			if p != nil {
				p.stdin.Close()
				p.cmd.Process.Kill()
				p.cmd.Wait()
			}
		}
	}()
	for i := range ps {
		cmd := exec.Command(d.self, "-root", dir, fmt.Sprint("-n=", n), fmt.Sprint("-floor=", floor))
		cmd.Env = append(os.Environ(), helperEnv+"=publish")
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return 0, nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return 0, nil, err
		}
		if err := cmd.Start(); err != nil {
			return 0, nil, err
		}
		p := &proc{cmd: cmd, stdin: stdin, sc: bufio.NewScanner(stdout)}
		ps[i] = p
		if !p.sc.Scan() || p.sc.Text() != "ready" {
			return 0, nil, fmt.Errorf("publish helper %d did not get ready", i)
		}
	}
	doneAt := make([]time.Time, procs)
	errs := make([]error, procs)
	names := make([][]string, procs)
	var wg sync.WaitGroup
	t0 := time.Now()
	for _, p := range ps {
		if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
			return 0, nil, err
		}
	}
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !p.sc.Scan() || p.sc.Text() != "done" {
				errs[i] = fmt.Errorf("publish helper %d failed", i)
				return
			}
			doneAt[i] = time.Now()
			for p.sc.Scan() {
				names[i] = append(names[i], p.sc.Text())
			}
			errs[i] = p.cmd.Wait()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, nil, err
	}
	var last time.Time
	for _, t := range doneAt {
		if t.After(last) {
			last = t
		}
	}
	for i := range ps {
		ps[i] = nil
	}
	var all []string
	for _, n := range names {
		all = append(all, n...)
	}
	return last.Sub(t0), all, nil
}

// countFsyncs runs one publish helper under strace and returns the fsync
// family calls per record.
func (d *driver) countFsyncs(dir string, n int, floor bool) (float64, error) {
	tmp, err := d.privateDir()
	if err != nil {
		return 0, err
	}
	out := filepath.Join(tmp, "strace.txt")
	cmd := exec.Command("strace", "-f", "-qq", "-c", "-o", out, "-e", "trace=fsync,fdatasync,syncfs,sync,sync_file_range",
		d.self, "-root", dir, fmt.Sprint("-n=", n), fmt.Sprint("-floor=", floor))
	cmd.Env = append(os.Environ(), helperEnv+"=publish")
	cmd.Stdin = strings.NewReader("go\n")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("strace: %w", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return 0, err
	}
	calls := 0
	for _, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		if len(fs) < 5 {
			continue
		}
		switch fs[len(fs)-1] {
		case "fsync", "fdatasync", "syncfs", "sync", "sync_file_range":
			var c int
			// columns: % time, seconds, usecs/call, calls, [errors,] syscall
			if _, err := fmt.Sscan(fs[3], &c); err == nil {
				calls += c
			}
		}
	}
	if calls == 0 {
		return 0, errors.New("strace counted no fsync at all")
	}
	return float64(calls) / float64(n), nil
}
