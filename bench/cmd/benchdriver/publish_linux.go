package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/ownerjournal/ownerjournal/bench/internal/benchkit"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// publish: median time of one Root.Publish (admission, renameio into
// records/, fsync of records/) ÷ the floor: renameio.WriteFile of the same
// bytes into the same directory plus the directory fsync. The two alternate,
// which one goes first alternating too, so drift hits both alike.
func (d *driver) publish() error {
	const warm, n = 30, 400
	r, err := d.privateRoot()
	if err != nil {
		return err
	}
	self, err := owner.Self()
	if err != nil {
		return err
	}
	dir := filepath.Join(r.Path(), "records")
	dirf, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer dirf.Close()
	ctx := context.Background()
	var ours, floor []time.Duration
	for i := 0; i < warm+n; i++ {
		rec := benchkit.Record(self, self, i)
		b, err := rec.Encode()
		if err != nil {
			return err
		}
		name := journal.NewID(self) + ".json"
		one := func() (time.Duration, error) {
			t0 := time.Now()
			err := r.Publish(ctx, rec)
			return time.Since(t0), err
		}
		two := func() (time.Duration, error) {
			t0 := time.Now()
			err := benchkit.FloorPublish(dir, dirf, name, b)
			return time.Since(t0), err
		}
		var to, tf time.Duration
		if i%2 == 0 {
			if to, err = one(); err == nil {
				tf, err = two()
			}
		} else {
			if tf, err = two(); err == nil {
				to, err = one()
			}
		}
		if err != nil {
			return err
		}
		if i >= warm {
			ours, floor = append(ours, to), append(floor, tf)
		}
	}
	mo, mf := benchkit.Median(ours), benchkit.Median(floor)
	report("publish", ratio(mo, mf), "median %s per publish vs floor %s; p90 %s vs %s; n=%d each",
		ms(mo), ms(mf), ms(benchkit.Quantile(ours, 0.9)), ms(benchkit.Quantile(floor, 0.9)), n)

	// Allocations of one publish, without the disk.
	var m0, m1 runtime.MemStats
	const an = 100
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for i := 0; i < an; i++ {
		if err := r.Publish(ctx, benchkit.Record(self, self, i)); err != nil {
			return err
		}
	}
	runtime.ReadMemStats(&m1)
	report("publish-allocs", fmt.Sprint((m1.Mallocs-m0.Mallocs)/an), "allocations per publish, %d bytes; the record is built outside too",
		(m1.TotalAlloc-m0.TotalAlloc)/an)

	// fsyncs per publish, counted by strace on a helper.
	r2, err := d.privateRoot()
	if err != nil {
		return err
	}
	fo, err := d.countFsyncs(r2.Path(), 50, false)
	if err != nil {
		return err
	}
	fd, err := d.privateDir()
	if err != nil {
		return err
	}
	ff, err := d.countFsyncs(fd, 50, true)
	if err != nil {
		return err
	}
	report("publish-fsyncs", fmt.Sprintf("%.2f", fo), "fsync calls per publish counted by strace; floor %.2f", ff)
	return nil
}

// publish-concurrent: 8 processes publishing 500 records each into one root,
// wall time ÷ the same with floor writes into one directory; then every
// record must be there.
func (d *driver) publishConcurrent() error {
	const procs, n, rounds = 8, 500, 3
	var ours, floor []time.Duration
	lost := 0
	for round := 0; round < rounds; round++ {
		r, err := d.privateRoot()
		if err != nil {
			return err
		}
		wo, names, err := d.publishers(r.Path(), procs, n, false)
		if err != nil {
			return err
		}
		scan, err := r.Scan()
		if err != nil {
			return err
		}
		have := map[string]bool{}
		for _, rec := range scan.Records {
			have[rec.ID+".json"] = true
		}
		if len(names) != procs*n {
			return fmt.Errorf("publishers reported %d records, want %d", len(names), procs*n)
		}
		for _, name := range names {
			if !have[name] {
				lost++
			}
		}
		if len(scan.Corrupt) > 0 || len(scan.Temps) > 0 {
			return fmt.Errorf("after concurrent publishing: %d corrupt records, %d temp files", len(scan.Corrupt), len(scan.Temps))
		}
		fdir, err := d.privateDir()
		if err != nil {
			return err
		}
		wf, fnames, err := d.publishers(fdir, procs, n, true)
		if err != nil {
			return err
		}
		if len(fnames) != procs*n {
			return fmt.Errorf("floor publishers reported %d records, want %d", len(fnames), procs*n)
		}
		ours, floor = append(ours, wo), append(floor, wf)
	}
	// The figure is the median of the rounds' ratios: each round's two
	// runs are next to each other in time, so a burst of other disk
	// traffic (other fsyncs share the journal) hits a pair, not one side.
	var each []string
	var ratios []float64
	for i := range ours {
		each = append(each, ms(ours[i])+"/"+ms(floor[i]))
		ratios = append(ratios, float64(ours[i])/float64(floor[i]))
	}
	sort.Float64s(ratios)
	report("publish-concurrent", fmt.Sprintf("%.3f", ratios[len(ratios)/2]), "%d processes × %d records, median of %d rounds' ratios (ours/floor: %s); %d of %d records lost",
		procs, n, rounds, strings.Join(each, ", "), lost, rounds*procs*n)
	return nil
}
