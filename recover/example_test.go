package recover_test

import (
	"context"
	"fmt"
	"os"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/recover"
)

// The start-up order of a daemon: create (or open and lease) its root first,
// then recover what dead predecessors left, then publish and serve. The
// recovery ends orphans and stale records but never removes the root its
// caller holds.
func ExampleRun_daemonStartup() {
	xdg, _ := os.MkdirTemp("", "oj-example")
	defer os.RemoveAll(xdg)
	os.Chmod(xdg, 0o700)
	os.Setenv("XDG_RUNTIME_DIR", xdg)

	// 1. The root, leased before anything else can sweep it.
	root, err := journal.Create("mydaemon")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer root.Close()

	// 2. Start-up recovery: orphans only (Options.All is for the runner
	// that ends a run).
	rep, err := recover.Run(context.Background(), root, recover.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("removed:", rep.RootRemoved)
	fmt.Println("kept:", rep.RootKept)
	fmt.Println("clean:", rep.Clean())

	// 3. Serve: publish records under admissions (root.Admit) from here.
	// At shutdown the runner (or the daemon itself) runs recover.Run with
	// All, which removes the root.
	rep, _ = recover.Run(context.Background(), root, recover.Options{All: true})
	fmt.Println("at shutdown, removed:", rep.RootRemoved)
	// Output:
	// removed: false
	// kept: this process holds its lease on the root
	// clean: true
	// at shutdown, removed: true
}
