//go:build linux

package bench

import (
	"testing"

	"github.com/ownerjournal/ownerjournal/bench/internal/benchkit"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/recover"
)

// scanFixture is a root with n orphan records (owner dead, subjects live
// sleepers), removed at the end of the benchmark.
func scanFixture(b *testing.B, n int) (*journal.Root, map[string]int) {
	b.Helper()
	dead, err := benchkit.DeadIdentity()
	if err != nil {
		b.Fatal(err)
	}
	var subjects []*benchkit.Sleeper
	b.Cleanup(func() {
		for _, s := range subjects {
			s.Kill()
		}
	})
	for i := 0; i < 10; i++ {
		s, err := benchkit.StartSleeper(false)
		if err != nil {
			b.Fatal(err)
		}
		subjects = append(subjects, s)
	}
	r := newRoot(b)
	recs := make([]*journal.Record, n)
	for i := range recs {
		recs[i] = benchkit.Record(dead, subjects[i%len(subjects)].ID, i)
	}
	names, err := benchkit.WriteRecords(r.Path(), recs)
	if err != nil {
		b.Fatal(err)
	}
	stat := make(map[string]int, n)
	for i, name := range names {
		stat[name] = recs[i].Subject.PID
	}
	return r, stat
}

// BenchmarkScan is journal.Root.Scan of 500 records; ns/op is per scan.
func BenchmarkScan(b *testing.B) {
	r, _ := scanFixture(b, 500)
	b.ReportAllocs()
	for b.Loop() {
		s, err := r.Scan()
		if err != nil || len(s.Records) != 500 {
			b.Fatal(err, len(s.Records))
		}
	}
}

// BenchmarkClassify is recover.Classify of 500 orphan records.
func BenchmarkClassify(b *testing.B) {
	r, _ := scanFixture(b, 500)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := recover.Classify(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScanFloor reads the same 500 files and one /proc/PID/stat each.
func BenchmarkScanFloor(b *testing.B) {
	r, stat := scanFixture(b, 500)
	b.ReportAllocs()
	for b.Loop() {
		if n, err := benchkit.FloorScan(r.Path()+"/records", stat); err != nil || n != 500 {
			b.Fatal(err, n)
		}
	}
}
