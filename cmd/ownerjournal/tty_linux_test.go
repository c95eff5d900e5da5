package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/owner"
)

// ptyOut collects what a process writes to its pseudo-terminal and lets a
// test wait for a string in it (woken by each read, never by a timer but the
// waitLimit safety net).
type ptyOut struct {
	mu      sync.Mutex
	buf     strings.Builder
	changed chan struct{}
	done    chan struct{}
}

func readPTY(f *os.File) *ptyOut {
	o := &ptyOut{changed: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(o.done)
		b := make([]byte, 4096)
		for {
			n, err := f.Read(b)
			if n > 0 {
				o.mu.Lock()
				o.buf.Write(b[:n])
				o.mu.Unlock()
				select {
				case o.changed <- struct{}{}:
				default:
				}
			}
			if err != nil { // EIO once every slave descriptor is closed
				return
			}
		}
	}()
	return o
}

func (o *ptyOut) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// await waits until the output holds s after offset from (as returned by a
// previous await, so that an earlier occurrence does not count) and returns
// the offset just past it.
func (o *ptyOut) await(t *testing.T, from int, s string) int {
	t.Helper()
	limit := time.After(waitLimit)
	for {
		out := o.String()
		if i := strings.Index(out[from:], s); i >= 0 {
			return from + i + len(s)
		}
		select {
		case <-o.changed:
		case <-o.done:
			out = o.String()
			if i := strings.Index(out[from:], s); i >= 0 {
				return from + i + len(s)
			}
			t.Fatalf("the terminal closed without %q; output:\n%s", s, out)
		case <-limit:
			t.Fatalf("no %q after %v; output:\n%s", s, waitLimit, out)
		}
	}
}

// procState is the state letter of pid in /proc/PID/stat.
func procState(t *testing.T, pid int) byte {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	require.NoError(t, err)
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	require.Greater(t, len(s), i+2)
	return s[i+2]
}

// awaitState waits until pid is in state (T: stopped) or not, waking on the
// terminal's output (a stop makes the shell print) and bounded by waitLimit.
func awaitStopped(t *testing.T, o *ptyOut, pid int, stopped bool) {
	t.Helper()
	limit := time.After(waitLimit)
	for (procState(t, pid) == 'T') != stopped {
		select {
		case <-o.changed:
		case <-time.After(10 * time.Millisecond):
			// A state change prints nothing when run stops without a
			// shell: look again shortly.
		case <-limit:
			t.Fatalf("pid %d stopped=%v not reached after %v; output:\n%s", pid, stopped, waitLimit, o)
		}
	}
}

// waitExit waits for cmd with the waitLimit safety net and returns its
// status (128+n when signalled).
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			require.NoError(t, err)
		}
		return exitStatus(cmd.ProcessState)
	case <-time.After(waitLimit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v did not exit within %v", cmd.Args, waitLimit)
		return -1
	}
}

// interactiveCMD reads one line and prints it; it writes its PID to
// DIR/cmd.pid first and says "ready" (typed as re""ady, so that a shell's
// echo of the command line does not match).
func interactiveCMD(dir string) string {
	return fmt.Sprintf(`echo $$ > %s/cmd.pid; echo re""ady; read line; echo "got: $line"`, dir)
}

// TestRunTerminalReadsLine (issue 13): run's stdin is a real pseudo-terminal
// (run leads its session, as under `script` or an ssh session), and CMD
// reads a line from it. CMD's group must be the terminal's foreground group,
// or its read stops it with SIGTTIN and run waits forever (main before the
// fix). After CMD ends, the terminal is run's again.
func TestRunTerminalReadsLine(t *testing.T) {
	t.Parallel()
	root := newRoot(t)
	dir := workDir(t)
	cmd := ojCmd("run", "--root", root, "--cgroup", "off", "--", "sh", "-c", interactiveCMD(dir))
	ptmx, err := pty.Start(cmd)
	require.NoError(t, err)
	defer ptmx.Close()
	out := readPTY(ptmx)
	at := out.await(t, 0, "ready")
	_, err = ptmx.Write([]byte("hello terminal\n"))
	require.NoError(t, err)
	out.await(t, at, "got: hello terminal")
	require.Equal(t, 0, waitExit(t, cmd), "output:\n%s", out)
	recs, err := readRecords(root)
	require.NoError(t, err)
	require.Empty(t, recs)
}

// TestRunTerminalNotATerminal: with stdin not a terminal, nothing changes:
// CMD reads its stdin (a pipe) as before.
func TestRunTerminalNotATerminal(t *testing.T) {
	t.Parallel()
	root := newRoot(t)
	dir := workDir(t)
	cmd := ojCmd("run", "--root", root, "--cgroup", "off", "--", "sh", "-c", interactiveCMD(dir))
	cmd.Stdin = strings.NewReader("piped line\n")
	p := start(t, cmd)
	require.Equal(t, 0, p.wait(t))
	require.Contains(t, p.out.String(), "got: piped line")
}

// TestRunTerminalCtrlZ (issue 13): Ctrl-Z and fg through a real interactive
// bash on a pseudo-terminal, the actual ^Z byte typed. CMD (reading a line)
// is stopped by the terminal's SIGTSTP; run must take the terminal back and
// stop itself, so that bash reports the job stopped and gets its prompt; on
// `fg` (SIGCONT to run's group, run's group in the foreground) run gives CMD
// the terminal again and continues it, and CMD reads the line typed then.
//
// The second case has no shell: run leads the terminal's session, so its
// process group is orphaned and the kernel discards its SIGTSTP (run does
// not stop); a SIGCONT sent to run continues CMD in the foreground.
//
// On main before the fix, ^Z stopped run itself, and CMD, stopped by
// SIGTTIN at its first read, was never continued.
func TestRunTerminalCtrlZ(t *testing.T) {
	t.Run("bash", func(t *testing.T) {
		t.Parallel()
		bash, err := exec.LookPath("bash")
		require.NoError(t, err)
		root := newRoot(t)
		dir := workDir(t)
		sh := exec.Command(bash, "--norc", "--noprofile", "-i")
		sh.Env = append(os.Environ(), "PS1=$ ", "TERM=dumb", "HISTFILE=/dev/null")
		sh.Dir = "/"
		ptmx, err := pty.Start(sh)
		require.NoError(t, err)
		defer ptmx.Close()
		defer sh.Process.Kill()
		out := readPTY(ptmx)
		say := func(s string) {
			t.Helper()
			_, err := ptmx.Write([]byte(s))
			require.NoError(t, err)
		}
		say("echo sta''rted\n")
		at := out.await(t, 0, "started")
		say(fmt.Sprintf("ownerjournal run --root %s --cgroup off -- sh -c '%s'\n", root, strings.ReplaceAll(interactiveCMD(dir), "'", `'\''`)))
		at = out.await(t, at, "ready")
		pidB, err := os.ReadFile(filepath.Join(dir, "cmd.pid"))
		require.NoError(t, err)
		cmdPID, err := strconv.Atoi(strings.TrimSpace(string(pidB)))
		require.NoError(t, err)
		runPID, err := owner.ParentOf(cmdPID)
		require.NoError(t, err)

		say("\x1a") // Ctrl-Z
		at = out.await(t, at, "Stopped")
		require.Equal(t, byte('T'), procState(t, cmdPID), "CMD is stopped")
		require.Equal(t, byte('T'), procState(t, runPID), "run stopped itself, as a job does")

		say("fg\n")
		awaitStopped(t, out, cmdPID, false)
		say("hello after fg\n")
		at = out.await(t, at, "got: hello after fg")
		say("echo status=$?\n")
		out.await(t, at, "status=0")
		say("exit\n")
		waitExit(t, sh)
		recs, err := readRecords(root)
		require.NoError(t, err)
		require.Empty(t, recs)
	})
	t.Run("SIGCONT", func(t *testing.T) {
		t.Parallel()
		root := newRoot(t)
		dir := workDir(t)
		cmd := ojCmd("run", "--root", root, "--cgroup", "off", "--", "sh", "-c", interactiveCMD(dir))
		ptmx, err := pty.Start(cmd)
		require.NoError(t, err)
		defer ptmx.Close()
		out := readPTY(ptmx)
		at := out.await(t, 0, "ready")
		pidB, err := os.ReadFile(filepath.Join(dir, "cmd.pid"))
		require.NoError(t, err)
		cmdPID, err := strconv.Atoi(strings.TrimSpace(string(pidB)))
		require.NoError(t, err)

		_, err = ptmx.Write([]byte("\x1a"))
		require.NoError(t, err)
		awaitStopped(t, out, cmdPID, true)
		// run has handled the stop once the terminal is its own again.
		awaitForeground(t, out, ptmx, cmd.Process.Pid)
		require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
		awaitStopped(t, out, cmdPID, false)
		_, err = ptmx.Write([]byte("hello after SIGCONT\n"))
		require.NoError(t, err)
		out.await(t, at, "got: hello after SIGCONT")
		require.Equal(t, 0, waitExit(t, cmd), "output:\n%s", out)
	})
}

// awaitForeground waits until pgid is the foreground process group of the
// terminal behind ptmx (TIOCGPGRP on the master reports the slave's).
func awaitForeground(t *testing.T, o *ptyOut, ptmx *os.File, pgid int) {
	t.Helper()
	rc, err := ptmx.SyscallConn()
	require.NoError(t, err)
	limit := time.After(waitLimit)
	for {
		fg, ferr := 0, error(nil)
		require.NoError(t, rc.Control(func(fd uintptr) { fg, ferr = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP) }))
		require.NoError(t, ferr)
		if fg == pgid {
			return
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-limit:
			t.Fatalf("process group %d not in the foreground after %v (it is %d); output:\n%s", pgid, waitLimit, fg, o)
		}
	}
}

// TestRunTerminalModesAfterSignal: a CMD that puts the terminal in raw mode
// without echo and dies of SIGKILL does not leave it so: run restores the
// modes it found, as bash does for a job killed by a signal, and takes the
// foreground back.
func TestRunTerminalModesAfterSignal(t *testing.T) {
	t.Parallel()
	root := newRoot(t)
	ptmx, tty, err := pty.Open()
	require.NoError(t, err)
	defer ptmx.Close()
	defer tty.Close()
	before, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	require.NoError(t, err)
	require.NotZero(t, before.Lflag&unix.ECHO, "a fresh terminal echoes")
	cmd := ojCmd("run", "--root", root, "--cgroup", "off", "--", "sh", "-c", `stty raw -echo; echo re""ady; kill -KILL $$`)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	require.NoError(t, cmd.Start())
	out := readPTY(ptmx)
	out.await(t, 0, "ready")
	require.Equal(t, 128+int(syscall.SIGKILL), waitExit(t, cmd), "run exits with CMD's status")
	after, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	require.NoError(t, err)
	require.Equal(t, before.Lflag, after.Lflag, "local modes (ECHO, ICANON) restored")
	require.Equal(t, before.Iflag, after.Iflag, "input modes restored")
}
