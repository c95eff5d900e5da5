package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// envHelper makes a re-executed test binary run helperMain (the Go crash
// tests start their helpers this way). The helper removes it from its own
// environment at once, so that the processes it starts (ownerjournal, which
// is a copy of this test binary too) do not dispatch to the helper again.
const envHelper = "OJ_TEST_HELPER"

// waitLimit bounds every wait of the tests. It is a safety net that turns a
// hang into a failure; nothing waits for it to pass.
const waitLimit = 30 * time.Second

// TestMain dispatches, in this order: a helper started by a Go test (env
// OJ_TEST_HELPER), then testscript's commands by argv[0]: "ownerjournal"
// (the CLI, through Main) and "ojhelper" (the same helpers, for scripts).
// testscript.Main puts both commands on PATH for the scripts and for the Go
// tests, which run them as real processes.
func TestMain(m *testing.M) {
	if os.Getenv(envHelper) != "" {
		os.Unsetenv(envHelper)
		os.Exit(helperMain(os.Args[1:]))
	}
	// Race-enabled binaries sleep a second at exit by default (to let
	// other goroutines report); every command of the tests is one.
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	testscript.Main(removingCopy{m}, map[string]func(){
		"ownerjournal": func() {
			forcefulKill = os.Getenv("OJ_TEST_NO_FORCEFUL_KILL") == ""
			os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
		},
		"ojhelper": func() { os.Exit(helperMain(os.Args[1:])) },
	})
}

// removingCopy runs the tests, then removes the copy of the test binary
// that children of the second user ran (testscript.Main exits itself, so
// testroot.Main's clean-up is done here).
type removingCopy struct{ m *testing.M }

func (r removingCopy) Run() int {
	code := r.m.Run()
	testroot.RemoveCopy()
	return code
}

// helperMain implements the helper processes of the tests:
//
//	exit N                         exit with status N
//	selfkill SIG                   die of signal SIG (KILL, TERM, ...)
//	sleep BASE [-ignore-term] [-pgrp]
//	                               write BASE.id, then block; on SIGINT,
//	                               SIGTERM or SIGHUP write BASE.sig (the
//	                               signals caught so far, one per line) and
//	                               exit 128+n, except for SIGTERM with
//	                               -ignore-term, which is only recorded;
//	                               -pgrp: lead a process group of its own
//	daemonize BASE DBASE [-ignore-term] [-exit]
//	                               write BASE.id, double-fork a setsid daemon
//	                               (`sleep DBASE`), write BASE.forked once
//	                               the intermediate process has exited, then
//	                               block (or exit)
//	spawn BASE -- PROG ARG...      a worker: write BASE.id, run PROG with its
//	                               output in BASE.out and BASE.err, write the
//	                               child's identity to BASE.child.id and, when
//	                               it ends, its status (128+n if signalled) to
//	                               BASE.exit
//	mid ARG...                     (internal) start `ojhelper ARG...` and exit
//	spawnexit [-name] BASE -- PROG ARG...
//	                               a spawner that dies at once: start PROG
//	                               (output in BASE.out, BASE.err; -name: with
//	                               OWNERJOURNAL_SPAWNER naming itself), write
//	                               its identity to BASE.child.id, exit 0
//	reaper [-setsid] BASE -- PROG ARG...
//	                               a child subreaper: run PROG (in a session
//	                               of its own with -setsid), reap every
//	                               process that ends up its child, and write
//	                               "PID STATUS" lines to BASE.reaped when
//	                               none is left
//
// Every file is published atomically (temp file and rename) so that a
// waiter never reads half of one. An identity file (*.id) holds the JSON of
// an owner.Identity.
func helperMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "ojhelper: no command")
		return 2
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "exit":
		if len(rest) != 1 {
			err = errors.New("usage: exit N")
			break
		}
		n, cerr := strconv.Atoi(rest[0])
		if cerr != nil {
			err = cerr
			break
		}
		return n
	case "selfkill":
		err = helperSelfkill(rest)
	case "sleep":
		return helperSleep(rest)
	case "daemonize":
		err = helperDaemonize(rest)
	case "spawn":
		return helperSpawn(rest)
	case "mid":
		err = startSelf(rest, nil)
	case "mute":
		err = helperMute(rest)
	case "nswrite":
		return helperNSWrite(rest)
	case "spawnexit":
		return helperSpawnExit(rest)
	case "reaper":
		return helperReaper(rest)
	case "watchwait":
		err = helperWatchWait(rest)
	case "endnoleader":
		err = helperEndNoLeader(rest)
	case "failsurvivor":
		err = helperFailSurvivor(rest)
	case "walkemfile":
		err = helperWalkEMFILE(rest)
	default:
		err = fmt.Errorf("unknown command %q", cmd)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ojhelper %s: %v\n", args[0], err)
		return 2
	}
	return 0
}

func signalByName(name string) (syscall.Signal, error) {
	name = strings.TrimPrefix(strings.ToUpper(name), "SIG")
	if n, err := strconv.Atoi(name); err == nil {
		return syscall.Signal(n), nil
	}
	s := unix.SignalNum("SIG" + name)
	if s == 0 {
		return 0, fmt.Errorf("unknown signal %q", name)
	}
	return s, nil
}

func helperSelfkill(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: selfkill SIG")
	}
	sig, err := signalByName(args[0])
	if err != nil {
		return err
	}
	if err := syscall.Kill(os.Getpid(), sig); err != nil {
		return err
	}
	for {
		time.Sleep(time.Hour)
	}
}

func helperSleep(args []string) int {
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "usage: sleep BASE [-ignore-term] [-pgrp]")
		return 2
	}
	base, ignoreTerm := args[0], false
	for _, a := range args[1:] {
		switch a {
		case "-ignore-term":
			ignoreTerm = true
		case "-pgrp":
			// Lead a process group of its own.
			if err := unix.Setpgid(0, 0); err != nil {
				fmt.Fprintln(os.Stderr, "ojhelper sleep: setpgid:", err)
				return 1
			}
		default:
			fmt.Fprintf(os.Stderr, "ojhelper sleep: unknown flag %q\n", a)
			return 2
		}
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	if err := writeSelfID(base + ".id"); err != nil {
		fmt.Fprintln(os.Stderr, "ojhelper sleep:", err)
		return 1
	}
	var got []string
	for s := range sigs {
		sig := s.(syscall.Signal)
		got = append(got, unix.SignalName(sig))
		if err := publishFile(base+".sig", []byte(strings.Join(got, "\n")+"\n")); err != nil {
			fmt.Fprintln(os.Stderr, "ojhelper sleep:", err)
		}
		if sig == syscall.SIGTERM && ignoreTerm {
			continue
		}
		return 128 + int(sig)
	}
	return 1
}

func helperDaemonize(args []string) error {
	if len(args) < 2 {
		return errors.New("usage: daemonize BASE DBASE [-ignore-term] [-exit]")
	}
	base, dbase := args[0], args[1]
	sleepArgs := []string{"mid", "sleep", dbase}
	exit := false
	for _, a := range args[2:] {
		switch a {
		case "-ignore-term":
			sleepArgs = append(sleepArgs, "-ignore-term")
		case "-exit":
			exit = true
		default:
			return fmt.Errorf("unknown flag %q", a)
		}
	}
	if err := writeSelfID(base + ".id"); err != nil {
		return err
	}
	// First fork: the intermediate process starts a new session (setsid),
	// forks the daemon (second fork) and exits, so that the daemon is
	// re-parented to the nearest subreaper or init.
	if err := startSelf(sleepArgs, &syscall.SysProcAttr{Setsid: true}); err != nil {
		return err
	}
	// The intermediate has exited and been reaped: the daemon has been
	// re-parented by now.
	if err := publishFile(base+".forked", nil); err != nil {
		return err
	}
	if exit {
		return nil
	}
	for {
		time.Sleep(time.Hour)
	}
}

// startSelf starts `ojhelper args...` (this executable under that name) with
// /dev/null as its standard streams; it waits for the process only when it
// is the intermediate of a double fork (attr set).
func startSelf(args []string, attr *syscall.SysProcAttr) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := &exec.Cmd{Path: exe, Args: append([]string{"ojhelper"}, args...), SysProcAttr: attr}
	if err := cmd.Start(); err != nil {
		return err
	}
	if attr != nil {
		return cmd.Wait()
	}
	return cmd.Process.Release()
}

func helperSpawn(args []string) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintln(os.Stderr, "usage: spawn BASE -- PROG [ARG...]")
		return 2
	}
	base, argv := args[0], args[2:]
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "ojhelper spawn:", err)
		return 1
	}
	if err := writeSelfID(base + ".id"); err != nil {
		return fail(err)
	}
	stdout, err := os.Create(base + ".out")
	if err != nil {
		return fail(err)
	}
	stderr, err := os.Create(base + ".err")
	if err != nil {
		return fail(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	// The child is ours and unreaped: its identity cannot be another's.
	id, err := owner.Of(cmd.Process.Pid)
	if err == nil {
		err = writeID(base+".child.id", id)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ojhelper spawn:", err)
	}
	cmd.Wait()
	code := exitStatus(cmd.ProcessState)
	if err := publishFile(base+".exit", []byte(strconv.Itoa(code)+"\n")); err != nil {
		return fail(err)
	}
	return 0
}

// publishFile writes path atomically: a temp file in the same directory,
// then rename.
func publishFile(path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func writeID(path string, id owner.Identity) error {
	b, err := json.Marshal(id)
	if err != nil {
		return err
	}
	return publishFile(path, append(b, '\n'))
}

func writeSelfID(path string) error {
	id, err := owner.Self()
	if err != nil {
		return err
	}
	return writeID(path, id)
}

func readID(path string) (owner.Identity, error) {
	var id owner.Identity
	b, err := os.ReadFile(path)
	if err != nil {
		return id, err
	}
	if err := json.Unmarshal(b, &id); err != nil {
		return id, fmt.Errorf("%s: %w", path, err)
	}
	if id.PID <= 0 || id.BootID == "" {
		return id, fmt.Errorf("%s: not an identity", path)
	}
	return id, nil
}

// awaitDir calls check until it reports true, re-checking whenever an entry
// of dir changes (inotify), never by polling on a timer. It fails when the
// process behind pidfd (if >= 0) exits first, or after waitLimit.
func awaitDir(dir string, pidfd int, check func() (bool, error)) error {
	ifd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return os.NewSyscallError("inotify_init1", err)
	}
	defer unix.Close(ifd)
	if _, err := unix.InotifyAddWatch(ifd, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE|unix.IN_MODIFY|unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_ATTRIB|unix.IN_DELETE_SELF); err != nil {
		return fmt.Errorf("inotify watch %s: %w", dir, err)
	}
	deadline := time.Now().Add(waitLimit)
	buf := make([]byte, 64<<10)
	for exited := false; ; {
		ok, err := check()
		if err != nil || ok {
			return err
		}
		if exited {
			return errors.New("the process waited on exited first")
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("gave up after %v", waitLimit)
		}
		fds := []unix.PollFd{{Fd: int32(ifd), Events: unix.POLLIN}}
		if pidfd >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(pidfd), Events: unix.POLLIN})
		}
		if _, err := unix.Poll(fds, int(left.Milliseconds())+1); err != nil && err != unix.EINTR {
			return os.NewSyscallError("poll", err)
		}
		for {
			if _, err := unix.Read(ifd, buf); err != nil {
				break
			}
		}
		exited = pidfd >= 0 && fds[1].Revents&unix.POLLIN != 0
	}
}

// awaitFile waits until path exists and returns its contents.
func awaitFile(path string, pidfd int) ([]byte, error) {
	var b []byte
	err := awaitDir(filepath.Dir(path), pidfd, func() (bool, error) {
		var err error
		b, err = os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for %s: %w", path, err)
	}
	return b, nil
}

// readRecords decodes the records of root directly from records/, without
// opening the journal (which could create its entries).
func readRecords(root string) ([]*journal.Record, error) {
	dir := filepath.Join(root, "records")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var recs []*journal.Record
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		rec, err := journal.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", e.Name(), err)
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// awaitRecord waits for a record of root whose subject is id.
func awaitRecord(root string, id owner.Identity, pidfd int) (*journal.Record, error) {
	var found *journal.Record
	err := awaitDir(filepath.Join(root, "records"), pidfd, func() (bool, error) {
		recs, err := readRecords(root)
		if err != nil {
			return false, err
		}
		for _, r := range recs {
			if r.Subject != nil && r.Subject.PID == id.PID && r.Subject.StartTime == id.StartTime {
				found = r
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for a record of pid %d in %s: %w", id.PID, root, err)
	}
	return found, nil
}

// awaitGone waits, on a verified pidfd, until the process id has exited.
func awaitGone(id owner.Identity) error {
	p, err := owner.Open(id)
	if errors.Is(err, owner.ErrGone) {
		return nil
	}
	if err != nil {
		return err
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := p.Wait(ctx); err != nil {
		return fmt.Errorf("pid %d still running: %w", id.PID, err)
	}
	return nil
}

// killLeftovers SIGKILLs, through verified handles, every process named by
// an identity file in dir that is still alive, and waits for it. It is the
// safety net that keeps a failed test from leaving processes behind.
func killLeftovers(dir string) []string {
	names, _ := filepath.Glob(filepath.Join(dir, "*.id"))
	var killed []string
	for _, n := range names {
		id, err := readID(n)
		if err != nil || owner.Check(id).State != owner.Alive {
			continue
		}
		p, err := owner.Open(id)
		if err != nil {
			continue
		}
		if p.Signal(syscall.SIGKILL) == nil {
			killed = append(killed, fmt.Sprintf("%s (pid %d)", filepath.Base(n), id.PID))
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			p.Wait(ctx)
			cancel()
		}
		p.Close()
	}
	return killed
}

// scrubbedTmuxEnv is the environment the tests run tmux with: nothing of
// theirs (no TMUX) reaches it.
func scrubbedTmuxEnv() []string { return []string{"PATH=/usr/bin:/bin", "HOME=/", "LC_ALL=C"} }

// startTmux starts a real tmux server on socket (new-session -d, which
// daemonizes the server) and returns the server's identity.
func startTmux(socket string) (owner.Identity, error) {
	run := func(args ...string) (string, error) {
		cmd := exec.Command("tmux", append([]string{"-f", "/dev/null", "-S", socket}, args...)...)
		cmd.Env, cmd.Dir = scrubbedTmuxEnv(), "/"
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("tmux %s: %w: %s", strings.Join(args, " "), err, out.String())
		}
		return strings.TrimSpace(out.String()), err
	}
	if _, err := run("new-session", "-d", "-s", "oj", "sleep 3600"); err != nil {
		return owner.Identity{}, err
	}
	out, err := run("display-message", "-p", "#{pid}")
	if err != nil {
		stopTmux(socket)
		return owner.Identity{}, err
	}
	pid, err := strconv.Atoi(out)
	if err != nil {
		stopTmux(socket)
		return owner.Identity{}, fmt.Errorf("tmux server pid %q: %w", out, err)
	}
	return owner.Of(pid)
}

// stopTmux kills the tmux server on socket, if one answers, and removes the
// socket file.
func stopTmux(socket string) {
	cmd := exec.Command("tmux", "-S", socket, "kill-server")
	cmd.Env, cmd.Dir = scrubbedTmuxEnv(), "/"
	cmd.Run()
	os.Remove(socket)
}

// tmuxAnswers reports whether a tmux server answers on socket.
func tmuxAnswers(socket string) bool {
	cmd := exec.Command("tmux", "-S", socket, "has-session")
	cmd.Env, cmd.Dir = scrubbedTmuxEnv(), "/"
	return cmd.Run() == nil
}

// oneJSON decodes b as exactly one JSON document into v: no second document,
// nothing but white space after it.
func oneJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("not a JSON document: %w\n%s", err, b)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("more than one JSON document on stdout:\n%s", b)
	}
	return nil
}
