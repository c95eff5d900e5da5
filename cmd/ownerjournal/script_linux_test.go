package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/ownerjournal/ownerjournal/owner"
)

// TestScripts runs the CLI contract scripts of testdata/script: every
// subcommand, flag and exit status, with real processes, signals and tmux.
//
// Each script gets $ROOT, a fresh private root directory with a short path,
// and $XDG_RUNTIME_DIR, a private base for `ownerjournal root`. Whatever a
// failed script leaves is cleaned up after it: processes named by identity
// files in $WORK are SIGKILLed, tmux servers it started are killed, the root
// is recovered with --all and removed.
//
// Commands the scripts get on top of testscript's own (all deterministic:
// waits are inotify and pidfd waits, bounded by a safety limit, never
// sleeps):
//
//	exitcode N PROG [ARG...]  run PROG, require exit status N (128+n when
//	                          signalled); stdout/stderr as for exec
//	waitfile FILE...          wait until each FILE exists
//	waitrecord ROOT IDFILE    wait until ROOT has a record whose subject is
//	                          the process in IDFILE
//	waitdead IDFILE           wait until the process in IDFILE has exited
//	alive IDFILE              the process in IDFILE is running (! alive: it
//	                          is not)
//	signal SIG IDFILE         send SIG through a verified pidfd
//	readpid VAR IDFILE        set $VAR to the PID in IDFILE
//	jsondoc                   stdout is exactly one JSON document
//	tree DIR                  print DIR's tree (names, types, modes, owners,
//	                          content hashes) to stdout, to compare later
//	chown UID PATH            change PATH's owner
//	tmuxserver SOCKET IDFILE  start a real tmux server on SOCKET
//	tmuxanswers SOCKET        a tmux server answers on SOCKET (! negates)
//	setvar VAR                set $VAR to the last command's stdout, trimmed
//	parentof IDFILE PIDFILE   the process in PIDFILE is the parent of the
//	                          process in IDFILE
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", "script"),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup:               scriptSetup,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode":    cmdExitcode,
			"waitfile":    cmdWaitfile,
			"waitrecord":  cmdWaitrecord,
			"waitdead":    cmdWaitdead,
			"alive":       cmdAlive,
			"signal":      cmdSignal,
			"readpid":     cmdReadpid,
			"jsondoc":     cmdJSONDoc,
			"tree":        cmdTree,
			"chown":       cmdChown,
			"tmuxserver":  cmdTmuxServer,
			"tmuxanswers": cmdTmuxAnswers,
			"setvar":      cmdSetvar,
			"parentof":    cmdParentof,
		},
	})
}

const tmuxSocketsKey = "tmux-sockets"

func scriptSetup(env *testscript.Env) error {
	root, err := os.MkdirTemp("", "oj")
	if err != nil {
		return err
	}
	xdg, err := os.MkdirTemp("", "ojx")
	if err != nil {
		os.RemoveAll(root)
		return err
	}
	for _, d := range []string{root, xdg} {
		if err := os.Chmod(d, 0o700); err != nil {
			return err
		}
	}
	env.Setenv("ROOT", root)
	env.Setenv("XDG_RUNTIME_DIR", xdg)
	env.Setenv("UID", strconv.Itoa(os.Geteuid()))
	sockets := new([]string)
	env.Values[tmuxSocketsKey] = sockets
	work := env.WorkDir
	env.Defer(func() {
		for _, s := range *sockets {
			stopTmux(s)
		}
		if killed := killLeftovers(work); len(killed) > 0 {
			env.T().Log("killed leftover processes: " + strings.Join(killed, ", "))
		}
		// Roots the script left (a kept root, one made unsafe on
		// purpose): restore them to a recoverable state and recover.
		leftRoots := []string{root}
		names, _ := filepath.Glob(filepath.Join(xdg, "ownerjournal", "*"))
		leftRoots = append(leftRoots, names...)
		for _, r := range leftRoots {
			if fi, err := os.Lstat(r); err == nil && fi.IsDir() {
				os.Chown(r, os.Geteuid(), os.Getegid())
				os.Chmod(r, 0o700)
				cmd := exec.Command("ownerjournal", "recover", "--all", "--grace", "100ms", "--root", r)
				cmd.Run()
			}
		}
		os.RemoveAll(root)
		os.RemoveAll(xdg)
	})
	return nil
}

func cmdExitcode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode N PROG [ARG...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = exitStatus(ee.ProcessState)
	case err != nil:
		ts.Fatalf("%s: %v", args[1], err)
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

func cmdWaitfile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: waitfile FILE...")
	}
	for _, a := range args {
		_, err := awaitFile(ts.MkAbs(a), -1)
		ts.Check(err)
	}
}

func scriptID(ts *testscript.TestScript, file string) owner.Identity {
	id, err := readID(ts.MkAbs(file))
	ts.Check(err)
	return id
}

func cmdWaitrecord(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitrecord ROOT IDFILE")
	}
	id := scriptID(ts, args[1])
	start := time.Now()
	rec, err := awaitRecord(ts.MkAbs(args[0]), id, -1)
	ts.Check(err)
	ts.Logf("record %s (%s) for pid %d appeared %v after the wait began", rec.ID, rec.Label, id.PID, time.Since(start).Round(time.Millisecond))
}

func cmdWaitdead(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitdead IDFILE")
	}
	ts.Check(awaitGone(scriptID(ts, args[0])))
}

func cmdAlive(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: alive IDFILE")
	}
	id := scriptID(ts, args[0])
	v := owner.Check(id)
	if alive := v.State == owner.Alive; alive == neg {
		ts.Fatalf("pid %d (%s): %v", id.PID, args[0], v)
	}
}

func cmdSignal(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: signal SIG IDFILE")
	}
	sig, err := signalByName(args[0])
	ts.Check(err)
	p, err := owner.Open(scriptID(ts, args[1]))
	ts.Check(err)
	defer p.Close()
	ts.Check(p.Signal(sig))
}

func cmdReadpid(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: readpid VAR IDFILE")
	}
	ts.Setenv(args[0], strconv.Itoa(scriptID(ts, args[1]).PID))
}

func cmdJSONDoc(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: jsondoc")
	}
	var v any
	ts.Check(oneJSON([]byte(ts.ReadFile("stdout")), &v))
}

// cmdTree prints one line per entry of the tree: path, type and mode,
// owner, and for regular files a hash of the contents; for symlinks, the
// target. Nothing is followed.
func cmdTree(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: tree DIR")
	}
	top := ts.MkAbs(args[0])
	var lines []string
	err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		rel, _ := filepath.Rel(top, p)
		line := fmt.Sprintf("%s %v uid=%d", rel, fi.Mode(), st.Uid)
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			line += " sha256=" + hex.EncodeToString(sum[:8])
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + target
		}
		lines = append(lines, line)
		return nil
	})
	ts.Check(err)
	fmt.Fprintln(ts.Stdout(), strings.Join(lines, "\n"))
}

func cmdChown(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: chown UID PATH")
	}
	uid, err := strconv.Atoi(args[0])
	ts.Check(err)
	ts.Check(os.Lchown(ts.MkAbs(args[1]), uid, -1))
}

func cmdTmuxServer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: tmuxserver SOCKET IDFILE")
	}
	socket := ts.MkAbs(args[0])
	sockets := ts.Value(tmuxSocketsKey).(*[]string)
	*sockets = append(*sockets, socket)
	id, err := startTmux(socket)
	ts.Check(err)
	ts.Check(writeID(ts.MkAbs(args[1]), id))
}

func cmdTmuxAnswers(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: tmuxanswers SOCKET")
	}
	if ok := tmuxAnswers(ts.MkAbs(args[0])); ok == neg {
		ts.Fatalf("tmux server on %s answers: %v", args[0], ok)
	}
}

func cmdSetvar(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: setvar VAR")
	}
	ts.Setenv(args[0], strings.TrimSpace(ts.ReadFile("stdout")))
}

func cmdParentof(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: parentof IDFILE PARENTIDFILE")
	}
	child, parent := scriptID(ts, args[0]), scriptID(ts, args[1])
	ppid, err := owner.ParentOf(child.PID)
	ts.Check(err)
	if ppid != parent.PID {
		ts.Fatalf("the parent of pid %d is %d, not %d", child.PID, ppid, parent.PID)
	}
}
