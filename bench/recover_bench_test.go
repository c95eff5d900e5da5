//go:build linux

package bench

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/ownerjournal/ownerjournal/bench/internal/benchkit"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

const staleN = 100

// staleRoot builds a root of staleN stale records (owner and subjects
// verified dead) outside the timer and returns its path.
func staleRoot(b *testing.B, deadOwner owner.Identity, deadSubjects []owner.Identity) string {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	p, err := benchkit.PrivateDir()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(p) })
	r, err := journal.Open(p)
	if err != nil {
		b.Fatal(err)
	}
	r.Close()
	recs := make([]*journal.Record, staleN)
	for i := range recs {
		recs[i] = benchkit.Record(deadOwner, deadSubjects[i%len(deadSubjects)], i)
	}
	if _, err := benchkit.WriteRecords(p, recs); err != nil {
		b.Fatal(err)
	}
	return p
}

func deadIDs(b *testing.B, n int) []owner.Identity {
	b.Helper()
	var ids []owner.Identity
	for i := 0; i < n; i++ {
		id, err := benchkit.DeadIdentity()
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// BenchmarkRecoverStale is recover.Run (orphans only) on 100 stale
// records, root removal included; ns/op is per recovery.
func BenchmarkRecoverStale(b *testing.B) {
	ids := deadIDs(b, 4)
	b.ReportAllocs()
	for b.Loop() {
		p := staleRoot(b, ids[0], ids[1:])
		r, err := journal.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		rep, err := recover.Run(context.Background(), r, recover.Options{Grace: time.Second})
		r.Close()
		if err != nil || !rep.Clean() || !rep.RootRemoved {
			b.Fatal(err, rep)
		}
	}
}

// BenchmarkRecoverStaleFloor reads and unlinks the same files and removes
// the root.
func BenchmarkRecoverStaleFloor(b *testing.B) {
	ids := deadIDs(b, 4)
	b.ReportAllocs()
	for b.Loop() {
		p := staleRoot(b, ids[0], ids[1:])
		if n, err := benchkit.FloorRecover(p); err != nil || n != staleN {
			b.Fatal(err, n)
		}
	}
}
