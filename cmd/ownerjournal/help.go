package main

import (
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"text/tabwriter"
)

// summaries says in one line what each subcommand is for (`help CMD`).
var summaries = map[string]string{
	"session": "Run CMD as a whole run in a fresh root: create it, export OWNERJOURNAL_ROOT, supervise CMD\nas run does, then recover --all and remove the root. Exit: CMD's status, or 3 when something\nwas retained (listed on stderr).",
	"root":    "Create (or validate) a private root under the default base and print its path. The root's\nowner is the caller's parent unless --owner-pid says otherwise: from a Makefile line or\nsh -c that parent exits at once, so pass --owner-pid, or use session instead.",
	"run": `Own CMD for its whole life: CMD runs in its own process group (and cgroup),
descendants that daemonize are journaled, and when CMD exits, run is told to
stop, or the spawner dies, the whole tree is ended (SIGTERM, grace, SIGKILL).
When stdin is a terminal run is in the foreground of, CMD's group gets the
terminal, and Ctrl-Z / fg work as under a shell.

The spawner is run's parent, captured by identity (pidfd) before anything
else; run ends CMD's tree when it exits. A spawner that may die before run
starts names itself in $OWNERJOURNAL_SPAWNER=PID: if run's parent is not that
process any more, run starts nothing. Without it, a parent outside run's
session (run was adopted by init) means the same.`,
	"publish": "Publish a record for a process someone else started (--pid), or, without --pid, for sockets\nand paths owned by the owner alone. Prints the record's id.",
	"retire":  "Remove one record by its id.",
	"forget":  "Remove one corrupt record by its file name, after printing its text. Only a record that\nstatus reports corrupt is removed; never a pattern.",
	"status":  "Classify every record and change nothing. Exit 3 when something would be retained.",
	"recover": "Replay the journal: end orphans (with --all, everything), remove what records name, and\nremove the root once every recorded owner is verified dead. Exit 3 when something was retained.",
}

// synopsis is the subcommand's line of the global usage.
func synopsis(name string) string {
	for _, l := range strings.Split(usage, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "ownerjournal "+name+" ") {
			return l
		}
	}
	return "ownerjournal " + name
}

// printHelp is a subcommand's -h: its synopsis, what it does, and its flags
// with two dashes, one line each.
func printHelp(w io.Writer, name string, f *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", synopsis(name), summaries[name])
	n := 0
	f.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nflags:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		f.VisitAll(func(fl *flag.Flag) {
			ph, use := placeholder(fl)
			if ph != "" {
				ph = " " + ph
			}
			if def := fl.DefValue; def != "" && def != "0" && def != "false" && def != "[]" {
				use += " (default " + def + ")"
			}
			fmt.Fprintf(tw, "  --%s%s\t%s\n", fl.Name, ph, use)
		})
		tw.Flush()
	}
	exit := exitStatuses[name]
	if exit == "" {
		exit = "0 done, 1 refused or failed, 2 usage, 3 something retained (root kept)."
	}
	fmt.Fprintln(w, "\nExit status: "+exit)
}

// exitStatuses is the exit status line of the subcommands whose status is
// not recover's.
var exitStatuses = map[string]string{
	"run": "CMD's (128+n if signalled); 4 the spawner was gone (CMD not\nstarted, or its tree ended); 3 something of the tree could not be confirmed\ngone and stays in the journal for `ownerjournal recover`; 2 usage; 1 refused or\nfailed.",
}

// help: `ownerjournal help [CMD]`.
func (c *cli) help(args []string, cmds map[string]func([]string) error) int {
	if len(args) == 0 {
		fmt.Fprint(c.stdout, usage)
		return exitOK
	}
	fn, ok := cmds[args[0]]
	if len(args) > 1 || !ok {
		fmt.Fprintf(c.stderr, "ownerjournal help: unknown command %q (commands: %s)\n", strings.Join(args, " "), commandList(cmds))
		return exitUsage
	}
	fn([]string{"-h"})
	return exitOK
}

// version: the module version and VCS revision the binary was built from.
func (c *cli) version() int {
	fmt.Fprintln(c.stdout, versionLine())
	return exitOK
}

// version is stamped by the npm packaging (make npm links with
// -X main.version=V, V from js/ownerjournal/package.json); a go build or go
// install leaves it empty and the module version is shown.
var version string

func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if version != "" {
			return "ownerjournal " + version
		}
		return "ownerjournal (no build information)"
	}
	v := bi.Main.Version
	if version != "" && (v == "" || v == "(devel)") {
		v = version
	}
	if v == "" {
		v = "(devel)"
	}
	var rev, when, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", modified"
			}
		}
	}
	line := "ownerjournal " + v
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		line += " (" + rev
		if when != "" {
			line += " " + when
		}
		line += dirty + ")"
	}
	return line + " " + bi.GoVersion
}

func commandList(cmds map[string]func([]string) error) string {
	var names []string
	for _, l := range strings.Split(usage, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "ownerjournal" && cmds[f[1]] != nil {
			names = append(names, f[1])
		}
	}
	return strings.Join(names, ", ")
}
