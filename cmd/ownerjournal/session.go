package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/ownerjournal/ownerjournal/internal/safetext"
	"os"
	"strconv"
	"time"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

// session: ownerjournal session [--name N] [--label L] [--grace D]
// [--cgroup M] -- CMD [ARG...]
//
// A whole run in a fresh root: create the root (owned by this process from
// its birth), export it as $OWNERJOURNAL_ROOT, run CMD under run's
// supervision, then recover --all and remove the root. The exit status is
// CMD's, or 3 when something was retained (listed on stderr, root kept).
func (c *cli) session(args []string) error {
	f := c.flags("session")
	name := f.String("name", "", "root name under the default base (default: session-PID-RANDOM)")
	label := f.String("label", "", "a label for CMD's record")
	grace := f.Duration("grace", recover.DefaultGrace, "time between SIGTERM and SIGKILL when ending CMD's tree and what it left")
	cgMode := f.String("cgroup", "auto", "put CMD in a cgroup of its own: auto, require or off")
	if err := parse(f, args); err != nil {
		return err
	}
	argv := f.Args()
	if len(argv) == 0 {
		return usagef("session needs a command after --")
	}
	if *grace <= 0 {
		return usagef("--grace must be positive")
	}
	if *cgMode != "auto" && *cgMode != "require" && *cgMode != "off" {
		return usagef("--cgroup must be auto, require or off, not %q", *cgMode)
	}
	if *name == "" {
		var b [3]byte
		rand.Read(b[:])
		*name = "session-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
	}
	if !journal.ValidName(*name) {
		return usagef("invalid root name %q (letters, digits, '.', '_', '-'; at most 64)", *name)
	}
	// From the root's creation to its removal, a signal (the runner's
	// Ctrl-C, a parent's death) never cuts the cleanup short: run forwards
	// it to CMD and ends the tree, then the recovery below still runs.
	_, g := recover.NewGuard(context.Background(), func(context.Context) error { return nil })
	defer g.Stop()
	path, err := c.sessionRoot(*name)
	if err != nil {
		return err
	}
	if err := os.Setenv(envRoot, path); err != nil {
		return err
	}
	code := exitOK
	runArgs := []string{"--root", path, "--label", *label, "--grace", grace.String(), "--cgroup", *cgMode, "--"}
	var ee *exitError
	switch err := c.run(append(runArgs, argv...)); {
	case errors.As(err, &ee):
		code = ee.code
	case err != nil:
		fmt.Fprintf(c.stderr, "ownerjournal session: %v\n", err)
		code = exitFail
	}
	if retained := c.endSession(path, *grace); retained && code != exitFail {
		code = exitRetained
	}
	return &exitError{code}
}

// sessionRoot creates the root and publishes this process as its owner, so
// that it stays protected after the Root (and its lease) is closed and run
// opens it again.
func (c *cli) sessionRoot(name string) (string, error) {
	self, err := owner.Self()
	if err != nil {
		return "", err
	}
	r, err := journal.Create(name)
	if err != nil {
		return "", createError(name, err)
	}
	defer r.Close()
	if err := ensureRootOwner(r, self); err != nil {
		return "", err
	}
	return r.Path(), nil
}

// endSession recovers the root with --all and removes it; what was retained
// is listed on stderr. It reports whether anything was retained.
func (c *cli) endSession(path string, grace time.Duration) bool {
	r, err := journal.Open(path)
	if err != nil {
		fmt.Fprintf(c.stderr, "ownerjournal session: %v\n", err)
		return true
	}
	defer r.Close()
	rep, err := recover.Run(context.Background(), r, recover.Options{All: true, Grace: grace})
	if err != nil {
		fmt.Fprintf(c.stderr, "ownerjournal session: recover %s: %v\n", path, err)
		return true
	}
	if rep.Clean() && rep.RootRemoved {
		return false
	}
	for _, a := range rep.Actions {
		if a.Retained != "" {
			fmt.Fprintf(c.stderr, "ownerjournal session: retained %s %s: %s\n", a.Verdict, orDash(retainedName(a)), safetext.Quote(a.Retained))
		}
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(c.stderr, "ownerjournal session: problem: %s\n", safetext.Quote(p))
	}
	fmt.Fprintf(c.stderr, "ownerjournal session: root kept: %s (inspect: ownerjournal status --root %s)\n", path, path)
	return true
}

// retainedName names a retained record: its id, or its file for a corrupt
// record, which has none.
func retainedName(a recover.Action) string {
	if a.ID != "" {
		return a.ID
	}
	return a.Path
}
