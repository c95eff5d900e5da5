//go:build linux

package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ownerjournal/ownerjournal/bench/internal/benchkit"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

func self(b *testing.B) owner.Identity {
	b.Helper()
	id, err := owner.Self()
	if err != nil {
		b.Fatal(err)
	}
	return id
}

// BenchmarkPublish is one Root.Publish: admission (shared flock), temp file,
// fsync, rename, fsync of records/.
func BenchmarkPublish(b *testing.B) {
	r := newRoot(b)
	id := self(b)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := r.Publish(ctx, benchkit.Record(id, id, i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkPublishFloor is renameio.WriteFile of the same bytes into the
// same directory plus the directory fsync.
func BenchmarkPublishFloor(b *testing.B) {
	r := newRoot(b)
	id := self(b)
	dir := filepath.Join(r.Path(), "records")
	d, err := os.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		rec := benchkit.Record(id, id, i)
		data, err := rec.Encode()
		if err != nil {
			b.Fatal(err)
		}
		if err := benchkit.FloorPublish(dir, d, rec.ID+".json", data); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkAdmit is one admission and its release (the shared flock on
// the root's lock file and the closing check).
func BenchmarkAdmit(b *testing.B) {
	r := newRoot(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		a, err := r.Admit(ctx)
		if err != nil {
			b.Fatal(err)
		}
		a.Done()
	}
}

// BenchmarkEncode is Record.Encode (validation and indented JSON).
func BenchmarkEncode(b *testing.B) {
	id := self(b)
	rec := benchkit.Record(id, id, 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rec.Encode(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode is the strict decoder every scanned record goes through.
func BenchmarkDecode(b *testing.B) {
	id := self(b)
	data, err := benchkit.Record(id, id, 1).Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := journal.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}
