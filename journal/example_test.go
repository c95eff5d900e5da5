package journal_test

import (
	"context"
	"fmt"
	"os"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// A participant creates its root (owned from birth: Create takes its lease),
// publishes a record for a scratch directory it owns, and retires it when it
// is done.
func ExampleCreate() {
	// The example's own private runtime directory; a real program keeps
	// the environment's.
	xdg, _ := os.MkdirTemp("", "oj-example")
	defer os.RemoveAll(xdg)
	os.Chmod(xdg, 0o700)
	os.Setenv("XDG_RUNTIME_DIR", xdg)

	root, err := journal.Create("example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer root.Close()
	fmt.Println("leased from birth:", root.HoldsLease())

	self, _ := owner.Self()
	os.Mkdir(root.Path()+"/scratch", 0o700)
	rec := &journal.Record{Kind: journal.KindPath, Label: "scratch", Owner: self, Paths: []string{"scratch"}, Phase: journal.PhaseLive}
	if err := root.Publish(context.Background(), rec); err != nil {
		fmt.Println(err)
		return
	}
	scan, _ := root.Scan()
	fmt.Println("records:", len(scan.Records), scan.Records[0].Label)
	fmt.Println("retire:", root.Retire(rec.ID))
	// Output:
	// leased from birth: true
	// records: 1 scratch
	// retire: <nil>
}
