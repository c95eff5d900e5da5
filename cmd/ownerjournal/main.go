// Command ownerjournal is the command-line face of the ownerjournal
// packages: create a private root, own a child process for its whole life,
// publish records for processes started elsewhere, and replay the journal.
//
// Exit status: 0 done, 1 refused or failed, 2 usage error, 3 something was
// retained (the root was kept). See the README for the contract.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ownerjournal/ownerjournal/internal/safetext"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

const (
	exitOK       = 0
	exitFail     = 1
	exitUsage    = 2
	exitRetained = 3
)

// envRoot names the root when --root is not given, so that workers inherit
// it from the runner.
const envRoot = "OWNERJOURNAL_ROOT"

const usage = `usage:
  ownerjournal session [--name N] [--label L] [--grace D] [--cgroup auto|require|off] -- CMD [ARG...]
  ownerjournal root NAME [--owner-pid PID]
  ownerjournal run [--root DIR] [--label L] [--grace D] [--cgroup auto|require|off] -- CMD [ARG...]
  ownerjournal publish [--root DIR] [--pid PID] [--owner-pid PID] [--label L] [--kind process|tmux] [--socket S]... [--path P]...
  ownerjournal retire [--root DIR] ID
  ownerjournal status [--root DIR] [--json | --tree]
  ownerjournal reopen [--root DIR]
  ownerjournal forget [--root DIR] FILE
  ownerjournal recover [--root DIR] [--all] [--grace D] [--wait D] [--dry-run] [--keep-root] [--missing-ok] [--json] [--as-owner]

The root is --root DIR, else $OWNERJOURNAL_ROOT.
Exit status: 0 done, 1 refused or failed, 2 usage, 3 something retained (root kept).
`

func main() { os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr)) }

// cli carries the output streams of one invocation.
type cli struct {
	stdout, stderr io.Writer
}

// usageError is a command-line mistake: exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// exitError carries a specific exit status with an already-printed outcome.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// Main runs one invocation and returns its exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmds := map[string]func([]string) error{
		"root":    c.root,
		"run":     c.run,
		"publish": c.publish,
		"retire":  c.retire,
		"status":  c.status,
		"recover": c.recover,
		"session": c.session,
		"reopen":  c.reopen,
		"forget":  c.forget,
	}
	fn, ok := cmds[args[0]]
	if !ok {
		switch args[0] {
		case "help", "-h", "--help":
			return c.help(args[1:], cmds)
		case "version", "--version":
			return c.version()
		}
		fmt.Fprintf(stderr, "ownerjournal: unknown command %q (commands: %s; ownerjournal help CMD)\n", args[0], commandList(cmds))
		return exitUsage
	}
	err := c.withJSONErrors(args[0], args[1:], fn)(args[1:])
	var ue *usageError
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "ownerjournal %s: %s\n", args[0], safetext.Quote(ue.msg))
		return exitUsage
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintf(stderr, "ownerjournal %s: %s\n", args[0], safetext.Quote(err.Error()))
		return exitFail
	}
}

// flags returns a FlagSet whose parse errors are usage errors.
func (c *cli) flags(name string) *flag.FlagSet {
	f := flag.NewFlagSet(name, flag.ContinueOnError)
	// Parse errors become one line (flagMessage); -h prints help.go's.
	out := &flagOutput{}
	f.SetOutput(out)
	f.Usage = func() { out.usage(c.stdout, name, f) }
	return f
}

func parse(f *flag.FlagSet, args []string) error {
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{flagMessage(f, f.Name(), err)}
	}
	return nil
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// rootPath resolves --root, then $OWNERJOURNAL_ROOT.
func rootPath(flagVal string) (string, error) {
	if flagVal != "" {
		return flagVal, nil
	}
	if v := os.Getenv(envRoot); v != "" {
		return v, nil
	}
	return "", usagef("no root: pass --root DIR or set %s", envRoot)
}

func openRoot(flagVal string) (*journal.Root, error) {
	p, err := rootPath(flagVal)
	if err != nil {
		return nil, err
	}
	return openAt(p)
}

// noRootError is a root that does not exist: "no root at PATH", never
// something that was removed. It wraps fs.ErrNotExist.
type noRootError struct{ path string }

func (e *noRootError) Error() string { return "no root at " + e.path }
func (e *noRootError) Unwrap() error { return fs.ErrNotExist }

// openAt opens the root p.
func openAt(p string) (*journal.Root, error) {
	r, err := journal.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &noRootError{p}
	}
	return r, err
}

// ownerIdentity is --owner-pid's identity, or the caller's parent (the
// runner or worker that invoked this command) when pid is 0.
func ownerIdentity(pid int) (owner.Identity, error) {
	if pid == 0 {
		pid = os.Getppid()
	}
	id, err := owner.Of(pid)
	if err != nil {
		return owner.Identity{}, processError("owner", pid, err)
	}
	return id, nil
}

// root: ownerjournal root NAME [--owner-pid PID]
func (c *cli) root(args []string) error {
	f := c.flags("root")
	ownerPID := f.Int("owner-pid", 0, "the process that lives for the run and owns the root (default: the caller's parent); -1 for none")
	name, rest := splitName(args)
	if err := parse(f, rest); err != nil {
		return err
	}
	if name == "" && f.NArg() == 1 {
		name = f.Arg(0)
	} else if name == "" || f.NArg() != 0 {
		return usagef("root takes exactly one NAME")
	}
	if !journal.ValidName(name) {
		return usagef("invalid root name %q (letters, digits, '.', '_', '-'; at most 64)", name)
	}
	var oid *owner.Identity
	if *ownerPID >= 0 {
		id, err := ownerIdentity(*ownerPID)
		if err != nil {
			return err
		}
		oid = &id
	}
	// The root's owner record keeps orphans-only recovery by anyone else
	// from removing a live run's root. Between the directory's creation and
	// that record such a recovery may find the root empty and remove it:
	// publishing then fails with ErrClosing, and the root is made again.
	for attempt := 0; ; attempt++ {
		r, err := journal.Create(name)
		if err != nil {
			return createError(name, err)
		}
		if oid != nil {
			err = ensureRootOwner(r, *oid)
		}
		path := r.Path()
		r.Close()
		if errors.Is(err, journal.ErrClosing) && attempt < 3 {
			continue
		}
		if err != nil {
			return err
		}
		fmt.Fprintln(c.stdout, path)
		return nil
	}
}

const rootOwnerLabel = "root owner"

func ensureRootOwner(r *journal.Root, oid owner.Identity) error {
	scan, err := r.Scan()
	if err != nil {
		return err
	}
	for _, rec := range scan.Records {
		if rec.Kind == journal.KindPath && rec.Label == rootOwnerLabel && rec.Owner == oid {
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.Publish(ctx, &journal.Record{Kind: journal.KindPath, Label: rootOwnerLabel, Owner: oid, Phase: journal.PhaseLive})
}

// splitName lets NAME/ID come before or after the flags.
func splitName(args []string) (string, []string) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0], args[1:]
	}
	return "", args
}

// oneName parses f from args, which must hold exactly one name besides the
// flags (before or after them); otherwise it is the usage error want.
func oneName(f *flag.FlagSet, args []string, want string) (string, error) {
	name, rest := splitName(args)
	if err := parse(f, rest); err != nil {
		return "", err
	}
	if name == "" && f.NArg() == 1 {
		name = f.Arg(0)
	} else if name == "" || f.NArg() != 0 {
		return "", usagef("%s", want)
	}
	return name, nil
}

// publish: a record for a process someone else started.
func (c *cli) publish(args []string) error {
	f := c.flags("publish")
	rootFlag := f.String("root", "", "root directory")
	pid := f.Int("pid", 0, "the subject's PID (without it, the record names only paths and sockets the owner owns)")
	ownerPID := f.Int("owner-pid", 0, "the owner's PID (default: the caller's parent)")
	label := f.String("label", "", "a label for reports")
	kind := f.String("kind", "process", "process or tmux")
	noGroup := f.Bool("no-group", false, "do not signal the subject's process group even if it leads one")
	var sockets, paths listFlag
	f.Var(&sockets, "socket", "a socket inside the root (repeatable)")
	f.Var(&paths, "path", "a path inside the root (repeatable)")
	if err := parse(f, args); err != nil {
		return err
	}
	if f.NArg() != 0 {
		return usagef("publish takes no arguments")
	}
	if *pid <= 0 && len(sockets)+len(paths) == 0 {
		return usagef("publish needs --pid PID, or --path/--socket for what the owner alone owns")
	}
	if *pid <= 0 && *kind != string(journal.KindProcess) {
		return usagef("--kind %s needs --pid", *kind)
	}
	if *kind != string(journal.KindProcess) && *kind != string(journal.KindTmux) {
		return usagef("--kind must be process or tmux, not %q", *kind)
	}
	r, err := openRoot(*rootFlag)
	if err != nil {
		return err
	}
	defer r.Close()
	oid, err := ownerIdentity(*ownerPID)
	if err != nil {
		return err
	}
	rec := &journal.Record{Kind: journal.KindPath, Label: *label, Owner: oid, Phase: journal.PhaseLive}
	if *pid > 0 {
		subj, err := owner.Of(*pid)
		if err != nil {
			return processError("subject", *pid, err)
		}
		rec.Kind, rec.Subject = journal.Kind(*kind), &subj
	}
	if pg, err := owner.GroupOf(*pid); *pid > 0 && err == nil && pg == *pid && !*noGroup {
		rec.PGID = *pid
	}
	for _, s := range sockets {
		rel, err := insideRoot(r, s)
		if err != nil {
			return fmt.Errorf("socket %s: %w", s, err)
		}
		rec.Sockets = append(rec.Sockets, rel)
	}
	for _, p := range paths {
		rel, err := insideRoot(r, p)
		if err != nil {
			return fmt.Errorf("path %s: %w", p, err)
		}
		rec.Paths = append(rec.Paths, rel)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Publish(ctx, rec); err != nil {
		return closingHint(r, err)
	}
	fmt.Fprintln(c.stdout, rec.ID)
	return nil
}

// insideRoot turns an absolute path inside the root, or a relative one,
// into the root-relative form records hold; anything else is refused.
func insideRoot(r *journal.Root, p string) (string, error) {
	if filepath.IsAbs(p) {
		rel, err := filepath.Rel(r.Path(), filepath.Clean(p))
		if err != nil {
			return "", fmt.Errorf("not inside the root %s: %w", r.Path(), journal.ErrBadName)
		}
		p = rel
	}
	if err := journal.CheckLocal(p); err != nil {
		return "", fmt.Errorf("not inside the root %s: %w", r.Path(), err)
	}
	return p, nil
}

func (c *cli) retire(args []string) error {
	f := c.flags("retire")
	rootFlag := f.String("root", "", "root directory")
	id, err := oneName(f, args, "retire takes exactly one ID")
	if err != nil {
		return err
	}
	if !journal.ValidID(id) {
		return usagef("invalid record id %q", id)
	}
	r, err := openRoot(*rootFlag)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.Retire(id)
}

// orDash is s for a human (quoted when unsafe, see safetext), or "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return safetext.Quote(s)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (c *cli) recover(args []string) error {
	f := c.flags("recover")
	rootFlag := f.String("root", "", "root directory")
	all := f.Bool("all", false, "also end what is in use (the runner ending the run)")
	grace := f.Duration("grace", recover.DefaultGrace, "time between SIGTERM and SIGKILL")
	wait := f.Duration("wait", recover.DefaultWait, "with --all: how long to wait for admitted creators before keeping the root (exit 3)")
	dry := f.Bool("dry-run", false, "classify and plan; change nothing")
	keep := f.Bool("keep-root", false, "never remove the root")
	asJSON := f.Bool("json", false, "print one JSON document")
	asOwner := f.Bool("as-owner", false, asOwnerHelp)
	missingOK := f.Bool("missing-ok", false, "a root that does not exist is nothing to recover (exit 0) rather than an error (exit 1)")
	if err := parse(f, args); err != nil {
		return err
	}
	if f.NArg() != 0 {
		return usagef("recover takes no arguments")
	}
	if *grace <= 0 || *wait <= 0 {
		return usagef("--grace must be positive, and so must --wait")
	}
	// Signals stay caught from the start: a Ctrl-C never cuts recovery
	// short, and a closed stdout (SIGPIPE) never kills it halfway.
	_, g := recover.NewGuard(context.Background(), func(context.Context) error { return nil })
	defer g.Stop()
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	p, err := rootPath(*rootFlag)
	if err != nil {
		return err
	}
	if *asOwner {
		if handled, err := c.asOwner(p, args); handled {
			return err
		}
	}
	r, err := openAt(p)
	if errors.Is(err, fs.ErrNotExist) && *missingOK {
		// Asked for: a teardown that may run twice. Nothing was removed
		// here, and the report says so.
		rep := &recover.Report{Root: p, Mode: map[bool]string{true: "all", false: "orphans"}[*all], Actions: []recover.Action{}, RootMissing: true}
		return c.printReport(rep, *asJSON)
	}
	if err != nil {
		return err
	}
	defer r.Close()
	rep, err := recover.Run(context.Background(), r, recover.Options{All: *all, Grace: *grace, Wait: *wait, DryRun: *dry, KeepRoot: *keep, Log: c.stderr})
	if err != nil {
		return err
	}
	if rep.Actions == nil {
		rep.Actions = []recover.Action{}
	}
	if err := c.printReport(rep, *asJSON); err != nil {
		return err
	}
	if !rep.Clean() {
		return &exitError{exitRetained}
	}
	if s := g.Signal(); s != nil {
		return &exitError{g.ExitCode()}
	}
	return nil
}

func (c *cli) printReport(rep *recover.Report, asJSON bool) error {
	if asJSON {
		return writeJSON(c.stdout, newReportDoc(rep))
	}
	counts := map[recover.Verdict]int{}
	for _, a := range rep.Actions {
		counts[a.Verdict]++
		if a.Retained != "" {
			// A corrupt record has no id: name its file.
			what := a.ID
			if what == "" {
				what = a.Path
			}
			fmt.Fprintf(c.stdout, "retained %s %s: %s\n", a.Verdict, orDash(what), safetext.Quote(a.Retained))
		}
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(c.stdout, "problem: %s\n", safetext.Quote(p))
	}
	fmt.Fprintf(c.stdout, "recover (%s) %s: %d orphan, %d stale, %d in-use, %d unknown, %d corrupt; %s; ",
		rep.Mode, safetext.Quote(rep.Root), counts[recover.Orphan], counts[recover.Stale], counts[recover.InUse], counts[recover.Unknown], counts[recover.Corrupt], retainedSummary(rep))
	switch {
	case rep.RootMissing:
		fmt.Fprintln(c.stdout, "no root there, nothing to recover")
	case rep.DryRun:
		fmt.Fprintln(c.stdout, "dry run, nothing changed")
	case rep.RootRemoved:
		fmt.Fprintln(c.stdout, "root removed")
	default:
		fmt.Fprintf(c.stdout, "root kept: %s\n", safetext.Quote(rootKeptText(rep.RootKept)))
	}
	return nil
}
