//go:build linux

package bench

import (
	"os"
	"testing"

	"github.com/ownerjournal/ownerjournal/bench/internal/benchkit"
	"github.com/ownerjournal/ownerjournal/journal"
)

// newRoot opens a fresh private root, closed and removed at the end.
func newRoot(b *testing.B) *journal.Root {
	b.Helper()
	r, err := benchkit.NewRoot()
	if err != nil {
		b.Fatal(err)
	}
	path := r.Path()
	b.Cleanup(func() { r.Close(); os.RemoveAll(path) })
	return r
}
