package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/ownerjournal/ownerjournal/bench/internal/benchkit"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

const records10k = 10000

// scan-10k: recover.Classify of 10,000 records (owner dead, subjects 100
// live sleepers: every record is an orphan, every subject is verified
// through /proc) ÷ the floor: list records/, read every file and one
// /proc/PID/stat per file.
func (d *driver) scan10k() error {
	const rounds = 3
	dead, err := benchkit.DeadIdentity()
	if err != nil {
		return err
	}
	var subjects []*benchkit.Sleeper
	defer func() {
		for _, s := range subjects {
			s.Kill()
		}
	}()
	for i := 0; i < 100; i++ {
		s, err := benchkit.StartSleeper(false)
		if err != nil {
			return err
		}
		subjects = append(subjects, s)
	}
	r, err := d.privateRoot()
	if err != nil {
		return err
	}
	recs := make([]*journal.Record, records10k)
	for i := range recs {
		recs[i] = benchkit.Record(dead, subjects[i%len(subjects)].ID, i)
	}
	names, err := benchkit.WriteRecords(r.Path(), recs)
	if err != nil {
		return err
	}
	stat := make(map[string]int, len(names))
	for i, n := range names {
		stat[n] = recs[i].Subject.PID
	}
	dir := filepath.Join(r.Path(), "records")
	var ours, floor, scans []time.Duration
	for round := 0; round < rounds+1; round++ {
		t0 := time.Now()
		st, err := recover.Classify(r)
		to := time.Since(t0)
		if err != nil {
			return err
		}
		orphans := 0
		for _, e := range st.Entries {
			if e.Verdict == recover.Orphan {
				orphans++
			}
		}
		if orphans != records10k {
			return fmt.Errorf("classify found %d orphans of %d records", orphans, records10k)
		}
		t0 = time.Now()
		got, err := benchkit.FloorScan(dir, stat)
		tf := time.Since(t0)
		if err != nil {
			return err
		}
		if got != records10k {
			return fmt.Errorf("floor read %d files", got)
		}
		t0 = time.Now()
		if _, err := r.Scan(); err != nil {
			return err
		}
		ts := time.Since(t0)
		if round > 0 { // the first round warms the caches
			ours, floor, scans = append(ours, to), append(floor, tf), append(scans, ts)
		}
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	if _, err := recover.Classify(r); err != nil {
		return err
	}
	runtime.ReadMemStats(&m1)
	mo, mf, msc := benchkit.Median(ours), benchkit.Median(floor), benchkit.Median(scans)
	report("scan-10k", ratio(mo, mf), "classify %s vs floor %s (median of %d); of which journal Scan %s; %d allocations, %d KiB per record",
		ms(mo), ms(mf), rounds, ms(msc), (m1.Mallocs-m0.Mallocs)/records10k, (m1.TotalAlloc-m0.TotalAlloc)/records10k/1024)
	return nil
}

// recover-10k: recover.Run (orphans only, as a daemon at start-up) on
// 10,000 stale records, root removal included ÷ the floor: read and unlink
// the same files, remove the root's entries and the root.
func (d *driver) recover10k() error {
	const rounds = 2
	deadOwner, err := benchkit.DeadIdentity()
	if err != nil {
		return err
	}
	var deadSubjects []owner.Identity
	for i := 0; i < 10; i++ {
		id, err := benchkit.DeadIdentity()
		if err != nil {
			return err
		}
		deadSubjects = append(deadSubjects, id)
	}
	build := func() (string, error) {
		p, err := d.privateDir()
		if err != nil {
			return "", err
		}
		r, err := journal.Open(p)
		if err != nil {
			return "", err
		}
		r.Close()
		recs := make([]*journal.Record, records10k)
		for i := range recs {
			recs[i] = benchkit.Record(deadOwner, deadSubjects[i%len(deadSubjects)], i)
		}
		_, err = benchkit.WriteRecords(p, recs)
		return p, err
	}
	var ours, floor []time.Duration
	for round := 0; round < rounds; round++ {
		p, err := build()
		if err != nil {
			return err
		}
		t0 := time.Now()
		r, err := journal.Open(p)
		if err != nil {
			return err
		}
		rep, err := recover.Run(context.Background(), r, recover.Options{Grace: time.Second})
		r.Close()
		to := time.Since(t0)
		if err != nil {
			return err
		}
		if !rep.Clean() || !rep.RootRemoved || len(rep.Actions) != records10k {
			return fmt.Errorf("recover: %d actions, %d retained, root removed %v: %s", len(rep.Actions), rep.Retained, rep.RootRemoved, rep.RootKept)
		}
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			return fmt.Errorf("root %s still there after recovery", p)
		}
		if p, err = build(); err != nil {
			return err
		}
		t0 = time.Now()
		n, err := benchkit.FloorRecover(p)
		tf := time.Since(t0)
		if err != nil {
			return err
		}
		if n != records10k {
			return fmt.Errorf("floor removed %d records", n)
		}
		ours, floor = append(ours, to), append(floor, tf)
	}
	mo, mf := benchkit.Median(ours), benchkit.Median(floor)
	report("recover-10k", ratio(mo, mf), "recover %s vs floor %s (median of %d), root removed; %.1f µs per record",
		ms(mo), ms(mf), rounds, float64(mo)/float64(time.Microsecond)/records10k)
	return nil
}
