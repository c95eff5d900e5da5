package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/ownerjournal/ownerjournal/bench/internal/benchkit"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

// benchGrace is the grace period between SIGTERM and SIGKILL everywhere in
// the driver.
const benchGrace = time.Second

// teardown-200: wall time of `ownerjournal recover --all --grace 1s` on 200
// live orphans (each leading its own process group; half ignore SIGTERM),
// ÷ the grace period.
func (d *driver) teardown200() error {
	const n, rounds = 200, 2
	var walls, cpus []time.Duration
	for round := 0; round < rounds; round++ {
		r, err := d.privateRoot()
		if err != nil {
			return err
		}
		ids, err := d.orphans(r.Path(), n, n/2, true)
		if err != nil {
			return err
		}
		var out, errb bytes.Buffer
		cmd := exec.Command(d.oj, "recover", "--all", "--grace", benchGrace.String(), "--root", r.Path())
		cmd.Stdout, cmd.Stderr = &out, &errb
		t0 := time.Now()
		err = cmd.Run()
		wall := time.Since(t0)
		if err != nil {
			return fmt.Errorf("recover --all: %v: %s%s", err, out.Bytes(), lastLines(errb.Bytes(), 5))
		}
		if left := alive(ids); left != 0 {
			return fmt.Errorf("recover --all left %d of %d orphans alive", left, n)
		}
		if _, err := os.Lstat(r.Path()); !os.IsNotExist(err) {
			return fmt.Errorf("recover --all kept the root: %s", out.Bytes())
		}
		walls = append(walls, wall)
		cpus = append(cpus, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
	}
	m := benchkit.Median(walls)
	report("teardown-200", ratio(m, benchGrace), "`recover --all --grace 1s` on %d orphans, %d ignoring SIGTERM: %s wall (median of %d: %s, %s), %s CPU; all gone, root removed",
		n, n/2, ms(m), rounds, ms(walls[0]), ms(walls[1]), ms(benchkit.Median(cpus)))
	return nil
}

func lastLines(b []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, []byte("\n"))
}

// exit-latency-ms: median time from a process's death (a SIGKILL sent by
// someone else) to ownerjournal confirming it: owner.Process.Wait on the
// pidfd, the confirmation recover and run use. Also the time of
// recover.Terminate on a process that obeys SIGTERM (signal + confirm).
func (d *driver) exitLatency() error {
	const n = 40
	var lats, terms []time.Duration
	for i := 0; i < n; i++ {
		s, err := benchkit.StartSleeper(false)
		if err != nil {
			return err
		}
		p, err := owner.Open(s.ID)
		if err != nil {
			s.Kill()
			return err
		}
		confirmed := make(chan time.Time, 1)
		waiting := make(chan struct{})
		go func() {
			close(waiting)
			p.Wait(context.Background())
			confirmed <- time.Now()
		}()
		<-waiting
		time.Sleep(time.Millisecond) // let the waiter block on the pidfd
		t0 := time.Now()
		syscall.Kill(s.ID.PID, syscall.SIGKILL)
		t1 := <-confirmed
		lats = append(lats, t1.Sub(t0))
		p.Close()
		<-s.Exited

		s, err = benchkit.StartSleeper(false)
		if err != nil {
			return err
		}
		if p, err = owner.Open(s.ID); err != nil {
			s.Kill()
			return err
		}
		t0 = time.Now()
		_, err = recover.Terminate(context.Background(), p, false, benchGrace)
		terms = append(terms, time.Since(t0))
		p.Close()
		s.Kill()
		if err != nil {
			return err
		}
	}
	m := benchkit.Median(lats)
	report("exit-latency-ms", msNum(m), "SIGKILL → pidfd wait returns; p90 %s, max %s, n=%d", ms(benchkit.Quantile(lats, 0.9)), ms(benchkit.Quantile(lats, 1)), n)
	report("terminate-ms", msNum(benchkit.Median(terms)), "recover.Terminate of a SIGTERM-obeying process: signal through the pidfd + confirmed exit; median, n=%d", n)
	return nil
}

// status-empty-ms: median wall time of the `ownerjournal status` process on
// an empty root, from fork to reaped; /bin/true measured the same way is the
// floor of starting any process here.
func (d *driver) statusEmpty() error {
	const warm, n = 5, 50
	r, err := d.privateRoot()
	if err != nil {
		return err
	}
	timeRun := func(name string, args ...string) (time.Duration, error) {
		cmd := exec.Command(name, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		t0 := time.Now()
		err := cmd.Run()
		el := time.Since(t0)
		if err != nil {
			return 0, fmt.Errorf("%s: %v: %s", name, err, out.Bytes())
		}
		return el, nil
	}
	var ours, floor []time.Duration
	for i := 0; i < warm+n; i++ {
		to, err := timeRun(d.oj, "status", "--root", r.Path())
		if err != nil {
			return err
		}
		tf, err := timeRun("/bin/true")
		if err != nil {
			return err
		}
		if i >= warm {
			ours, floor = append(ours, to), append(floor, tf)
		}
	}
	m := benchkit.Median(ours)
	report("status-empty-ms", msNum(m), "wall of `ownerjournal status --root R` on an empty root; p90 %s; /bin/true %s; n=%d",
		ms(benchkit.Quantile(ours, 0.9)), ms(benchkit.Median(floor)), n)
	return nil
}

// forge-poll-ratio: ending 20 orphans with recover.Run (orphans only,
// grace 1 s) ÷ the first seed document's reaper: one process after another,
// verify, SIGTERM, poll every 25 ms for up to 1 s, SIGKILL, poll again. Once
// with 20 processes that obey SIGTERM and once with 20 that ignore it; the
// figure is the worse of the two ratios.
func (d *driver) forgePoll() error {
	const n = 20
	type result struct{ ours, base time.Duration }
	var res [2]result
	for v, ignore := range []int{0, n} {
		// Ours.
		r, err := d.privateRoot()
		if err != nil {
			return err
		}
		ids, err := d.orphans(r.Path(), n, ignore, false)
		if err != nil {
			return err
		}
		t0 := time.Now()
		rep, err := recover.Run(context.Background(), r, recover.Options{Grace: benchGrace})
		res[v].ours = time.Since(t0)
		if err != nil {
			return err
		}
		if !rep.Clean() || alive(ids) != 0 {
			return fmt.Errorf("recover left %d of %d alive, %d retained", alive(ids), n, rep.Retained)
		}
		// The baseline.
		r2, err := d.privateRoot()
		if err != nil {
			return err
		}
		ids, err = d.orphans(r2.Path(), n, ignore, false)
		if err != nil {
			return err
		}
		t0 = time.Now()
		if err := pollReaper(ids); err != nil {
			return err
		}
		res[v].base = time.Since(t0)
		if alive(ids) != 0 {
			return fmt.Errorf("the polling reaper left %d of %d alive", alive(ids), n)
		}
	}
	ro := float64(res[0].ours) / float64(res[0].base)
	ri := float64(res[1].ours) / float64(res[1].base)
	worst := max(ro, ri)
	report("forge-poll-ratio", fmt.Sprintf("%.4f", worst), "worse of: %d TERM-obeying orphans %s vs %s = %.4f; %d TERM-ignoring %s vs %s = %.4f",
		n, ms(res[0].ours), ms(res[0].base), ro, n, ms(res[1].ours), ms(res[1].base), ri)
	report("forge-poll-ratio-obeying", fmt.Sprintf("%.4f", ro), "recover.Run %s vs sequential 25 ms polls %s", ms(res[0].ours), ms(res[0].base))
	report("forge-poll-ratio-ignoring", fmt.Sprintf("%.4f", ri), "recover.Run %s vs sequential 25 ms polls %s", ms(res[1].ours), ms(res[1].base))
	return nil
}

// pollReaper is the first seed document's way of ending processes, one
// after another: verify the identity, SIGTERM, poll every 25 ms for up to
// 1 s, then SIGKILL and poll again. A zombie counts as gone (more generous
// than kill(pid, 0), which sees zombies as alive).
func pollReaper(ids []owner.Identity) error {
	gone := func(id owner.Identity) bool { return owner.Check(id).State != owner.Alive }
	poll := func(id owner.Identity) bool {
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
			time.Sleep(25 * time.Millisecond)
			if gone(id) {
				return true
			}
		}
		return false
	}
	for _, id := range ids {
		if gone(id) {
			continue
		}
		if err := syscall.Kill(id.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
		if poll(id) {
			continue
		}
		if err := syscall.Kill(id.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
		if !poll(id) {
			return fmt.Errorf("pid %d survived SIGKILL", id.PID)
		}
	}
	return nil
}
