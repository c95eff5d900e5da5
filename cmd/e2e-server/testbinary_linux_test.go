package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/testguard"
)

// envHelper makes TestHelperHoldsSession do its work: it runs only in the
// test binary re-executed by TestTestBinarySignalled.
const envHelper = "OJ_E2E_HELPER_MARKERS"

// helperReport is what the helper test tells its parent.
type helperReport struct {
	Guard   string      `json:"guard"` // the test binary's root
	Root    string      `json:"root"`  // the server's root, inside it
	Server  int         `json:"server"`
	Session sessionInfo `json:"session"`
}

// TestHelperHoldsSession is the body of the re-executed test binary: a
// test that starts a server, creates a tmux session and then hangs, as a
// test does when its binary is interrupted. Outside that role it does
// nothing.
func TestHelperHoldsSession(t *testing.T) {
	dir := os.Getenv(envHelper)
	if dir == "" {
		return
	}
	root := newRoot(t)
	s := startServer(t, root, srvOpts{})
	si := s.create()
	b, err := json.Marshal(helperReport{Guard: testguard.Root().Path(), Root: root, Server: s.ready.PID, Session: si})
	require.NoError(t, err)
	tmp := filepath.Join(dir, ".report")
	require.NoError(t, os.WriteFile(tmp, b, 0o644))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, "report")))
	for {
		time.Sleep(time.Hour)
	}
}

// TestTestBinarySignalled: a test binary SIGTERMed while a test holds a
// server with a live tmux session — its t.Cleanup never runs — still ends
// everything through testguard: the server is stopped (it ends its tmux
// server in order), the server's root and the binary's root are removed,
// and the binary exits 143.
func TestTestBinarySignalled(t *testing.T) {
	requireTmux(t)
	by := startBystanders(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	cmd := exec.Command(exe, "-test.run=^TestHelperHoldsSession$", "-test.count=1")
	// TMPDIR: the helper's own t.TempDir lands in dir, which this test owns
	// and removes; the SIGTERMed helper never runs its cleanups.
	cmd.Env = append(os.Environ(), envHelper+"="+dir, "TMPDIR="+dir, noExitSleep())
	cmd.Dir = "/"
	var out testroot.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }()
	t.Cleanup(func() {
		select {
		case <-waited:
		default:
			cmd.Process.Kill()
			<-waited
		}
	})
	var rep helperReport
	require.NoError(t, json.Unmarshal(testroot.WaitFileWithin(t, filepath.Join(dir, "report"), cmd.Process.Pid, waitTimeout), &rep))
	server, err := owner.Of(rep.Server)
	require.NoError(t, err)
	sp, err := owner.Open(server)
	require.NoError(t, err)
	defer sp.Close()

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-waited:
	case <-time.After(waitTimeout):
		require.FailNow(t, "the test binary did not exit", "%s", out.String())
	}
	require.Equal(t, 128+int(syscall.SIGTERM), cmd.ProcessState.ExitCode(), "%s", out.String())
	requireExited(t, sp)
	for _, p := range []string{rep.Root, rep.Guard, rep.Session.Socket} {
		_, err := os.Lstat(p)
		assert.ErrorIs(t, err, fs.ErrNotExist, "%s must be gone\n%s", p, out.String())
	}
	requireNothingLeft(t, rep.Root)
	requireNothingLeft(t, rep.Guard)
	by.check(t)
	if t.Failed() {
		t.Logf("test binary output:\n%s", out.String())
	}
}
