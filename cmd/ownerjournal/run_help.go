package main

import (
	"flag"
	"fmt"
)

// runHelp is `ownerjournal run -h`.
func runHelp(f *flag.FlagSet) {
	w := f.Output()
	fmt.Fprint(w, `usage: ownerjournal run [--root DIR] [--label L] [--grace D] [--cgroup auto|require|off] -- CMD [ARG...]

Owns CMD for its whole life: CMD runs in its own process group (and cgroup),
descendants that daemonize are journaled, and when CMD exits, run is told to
stop, or the spawner dies, the whole tree is ended (SIGTERM, grace, SIGKILL).
When stdin is a terminal run is in the foreground of, CMD's group gets the
terminal, and Ctrl-Z / fg work as under a shell.

The spawner is run's parent, captured by identity (pidfd) before anything
else; run ends CMD's tree when it exits. A spawner that may die before run
starts names itself in $OWNERJOURNAL_SPAWNER=PID: if run's parent is not that
process any more, run starts nothing. Without it, a parent outside run's
session (run was adopted by init) means the same.

Exit status: CMD's (128+n if signalled); 4 the spawner was gone (CMD not
started, or its tree ended); 3 something of the tree could not be confirmed
gone and stays in the journal for `+"`ownerjournal recover`"+`; 2 usage; 1 refused or
failed.

`)
	f.PrintDefaults()
}
