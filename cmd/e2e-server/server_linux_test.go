package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

// openSession opens verified handles on a session's tmux server and pane.
func openSession(t *testing.T, si sessionInfo) (tmux, pane *owner.Process) {
	t.Helper()
	id, err := owner.Of(si.PID)
	require.NoError(t, err)
	require.Equal(t, si.StartTime, id.StartTime)
	tmux, err = owner.Open(id)
	require.NoError(t, err)
	t.Cleanup(func() { tmux.Close() })
	pid, err := owner.Of(si.PanePID)
	require.NoError(t, err)
	pane, err = owner.Open(pid)
	require.NoError(t, err)
	t.Cleanup(func() { pane.Close() })
	return tmux, pane
}

// requireExited waits (bounded) for each handle's process to exit.
func requireExited(t *testing.T, ps ...*owner.Process) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for _, p := range ps {
		require.NoError(t, p.Wait(ctx), "%v must have exited", p.Identity())
	}
}

func recordIDs(recs []*journal.Record) map[string]*journal.Record {
	m := map[string]*journal.Record{}
	for _, r := range recs {
		m[r.ID] = r
	}
	return m
}

// TestSessionLifecycle: sessions are created through the gate with intent and
// live records naming the tmux server as a group leader; DELETE ends one
// (verified on its pidfd), unlinks its socket and retires its records;
// SIGTERM ends the rest in order and exits 143, leaving nothing but the
// root's skeleton, which recovery then removes.
func TestSessionLifecycle(t *testing.T) {
	requireTmux(t)
	by := startBystanders(t)
	root := newRoot(t)
	s := startServer(t, root, srvOpts{})

	code, b := s.call("GET", "/healthz", nil)
	require.Equal(t, http.StatusOK, code, "%s", b)
	assert.Contains(t, string(b), `"tmux":"/`)

	a := s.create()
	c := s.create()
	aTmux, aPane := openSession(t, a)
	cTmux, cPane := openSession(t, c)
	recs := recordIDs(records(t, root))
	require.Contains(t, recs, a.ID)
	ra := recs[a.ID]
	assert.Equal(t, journal.KindTmux, ra.Kind)
	assert.Equal(t, journal.PhaseLive, ra.Phase)
	assert.Equal(t, []string{a.SocketName}, ra.Sockets)
	require.NotNil(t, ra.Subject)
	assert.Equal(t, a.PID, ra.Subject.PID)
	assert.Equal(t, a.PID, ra.PGID, "the tmux server leads its process group")
	assert.Equal(t, s.ready.PID, ra.Owner.PID)
	assert.LessOrEqual(t, len(a.SocketName), journal.MaxSocketName)
	// Two tmux records, two pane records, one state record.
	assert.Len(t, recs, 5)

	code, b = s.call("DELETE", "/sessions/"+a.ID, nil)
	require.Equal(t, http.StatusOK, code, "%s", b)
	requireExited(t, aTmux, aPane)
	_, err := os.Lstat(a.Socket)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.NotContains(t, recordIDs(records(t, root)), a.ID)
	assert.Len(t, records(t, root), 3)
	code, _ = s.call("DELETE", "/sessions/"+a.ID, nil)
	assert.Equal(t, http.StatusNotFound, code)
	assert.True(t, tmuxAnswers(t, c.Socket))

	s.signal(syscall.SIGTERM)
	require.Equal(t, 128+int(syscall.SIGTERM), s.exitCode(), "%s", s.stderr.String())
	requireExited(t, cTmux, cPane)
	_, err = os.Lstat(c.Socket)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.Empty(t, records(t, root), "every record retired")
	ents, err := os.ReadDir(root)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"leases", "lock", "records"}, names, "state and sockets gone")
	recoverRoot(t, root, libOrphans)
	requireNothingLeft(t, root)
	by.check(t)
}

// TestExitStatus: the first signal decides the exit status, 128+n.
func TestExitStatus(t *testing.T) {
	requireTmux(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			root := newRoot(t)
			s := startServer(t, root, srvOpts{})
			si := s.create()
			tmux, pane := openSession(t, si)
			s.signal(sig)
			require.Equal(t, 128+int(sig), s.exitCode())
			requireExited(t, tmux, pane)
			recoverRoot(t, root, libOrphans)
			requireNothingLeft(t, root)
		})
	}
}

// TestTmuxUnavailable: a missing or non-executable tmux gives a 5xx whose
// body names tmux; no session is faked, nothing is recorded or created.
func TestTmuxUnavailable(t *testing.T) {
	requireTmux(t)
	dir := t.TempDir()
	// A script that would "succeed" if it were run: it must not be.
	notExec := filepath.Join(dir, "tmux-not-executable")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\nexit 0\n"), 0o644))
	emptyPath := filepath.Join(dir, "empty")
	require.NoError(t, os.Mkdir(emptyPath, 0o755))
	for _, tc := range []struct {
		name string
		o    srvOpts
	}{
		{"missing path", srvOpts{args: []string{"--tmux", filepath.Join(dir, "no-such-tmux")}}},
		{"not executable", srvOpts{args: []string{"--tmux", notExec}}},
		{"a directory", srvOpts{args: []string{"--tmux", dir}}},
		{"not on PATH", srvOpts{env: []string{"PATH=" + emptyPath}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := newRoot(t)
			s := startServer(t, root, tc.o)
			code, b := s.call("POST", "/sessions", nil)
			assert.GreaterOrEqual(t, code, 500, "%s", b)
			assert.Contains(t, string(b), "tmux")
			code, b = s.call("GET", "/healthz", nil)
			assert.Equal(t, http.StatusOK, code)
			assert.Contains(t, string(b), "tmux_error")
			recs := records(t, root)
			require.Len(t, recs, 1, "only the state record")
			assert.Equal(t, journal.KindPath, recs[0].Kind)
			ents, err := os.ReadDir(root)
			require.NoError(t, err)
			for _, e := range ents {
				assert.False(t, strings.HasPrefix(e.Name(), "t-"), "socket %s", e.Name())
			}
			s.signal(syscall.SIGTERM)
			require.Equal(t, 143, s.exitCode())
			recoverRoot(t, root, libOrphans)
			requireNothingLeft(t, root)
		})
	}
}

// TestReset: reset ends every tmux server, destroys the old state and serves
// again with fresh state; nothing of the old generation is left.
func TestReset(t *testing.T) {
	requireTmux(t)
	root := newRoot(t)
	s := startServer(t, root, srvOpts{})
	var h struct {
		Scratch string `json:"scratch"`
	}
	_, b := s.call("GET", "/healthz", nil)
	require.NoError(t, json.Unmarshal(b, &h))
	a, c := s.create(), s.create()
	aTmux, aPane := openSession(t, a)
	cTmux, cPane := openSession(t, c)

	code, b := s.call("POST", "/reset", nil)
	require.Equal(t, http.StatusOK, code, "%s", b)
	assert.Contains(t, string(b), a.ID)
	assert.Contains(t, string(b), c.ID)
	requireExited(t, aTmux, aPane, cTmux, cPane)
	for _, p := range []string{a.Socket, c.Socket, h.Scratch} {
		_, err := os.Lstat(p)
		require.ErrorIs(t, err, fs.ErrNotExist, p)
	}
	recs := records(t, root)
	require.Len(t, recs, 1)
	assert.Equal(t, journal.KindPath, recs[0].Kind)

	d := s.create()
	assert.Equal(t, 2, d.Generation)
	s.signal(syscall.SIGTERM)
	require.Equal(t, 143, s.exitCode())
	recoverRoot(t, root, libOrphans)
	requireNothingLeft(t, root)
}

// TestResetWaitsForCreator: a reset that begins while a creator is admitted
// (tmux already daemonized, the live record not yet written) closes the gate,
// refuses new creators, waits for the admitted one and then ends its tmux
// server too: reset does not leak tmux.
func TestResetWaitsForCreator(t *testing.T) {
	requireTmux(t)
	root := newRoot(t)
	s := startServer(t, root, srvOpts{pauseAt: stageAfterDaemonized + "," + stageGateClosed})
	created := s.async("POST", "/sessions", nil)
	s.marker(stageAfterDaemonized)
	reset := s.async("POST", "/reset", nil)
	s.marker(stageGateClosed)
	code, b := s.call("POST", "/sessions", nil)
	assert.Equal(t, http.StatusServiceUnavailable, code, "no creator after the gate closed: %s", b)
	s.release(stageGateClosed)
	s.release(stageAfterDaemonized)

	r := awaitResult(t, created)
	require.NoError(t, r.err)
	require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
	var si sessionInfo
	require.NoError(t, json.Unmarshal(r.body, &si))
	rr := awaitResult(t, reset)
	require.NoError(t, rr.err)
	require.Equal(t, http.StatusOK, rr.code, "%s", rr.body)
	assert.Contains(t, string(rr.body), si.ID, "reset ended the session created under it")
	// The tmux server is gone: its socket was unlinked only after it
	// stopped answering, and the pane went with it.
	_, err := os.Lstat(si.Socket)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.Equal(t, owner.Dead, owner.Check(sessionIdentity(s, si)).State)
	s.signal(syscall.SIGTERM)
	require.Equal(t, 143, s.exitCode())
	recoverRoot(t, root, libOrphans)
	requireNothingLeft(t, root)
}

// TestResetDrainTimeout: when a handler of the old generation outlives the
// drain bound, reset serves again with fresh state but destroys the old state
// only after that handler has finished; the handler never sees its state
// destroyed.
func TestResetDrainTimeout(t *testing.T) {
	requireTmux(t)
	root := newRoot(t)
	s := startServer(t, root, srvOpts{pauseAt: stageScratch, args: []string{"--drain-timeout", "100ms"}})
	var h struct {
		Scratch string `json:"scratch"`
	}
	_, b := s.call("GET", "/healthz", nil)
	require.NoError(t, json.Unmarshal(b, &h))
	put := s.async("PUT", "/scratch/note", []byte("hello"))
	s.marker(stageScratch)

	code, b := s.call("POST", "/reset", nil)
	require.Equal(t, http.StatusOK, code, "%s", b)
	assert.Contains(t, string(b), "destroyed when its last handler finishes")
	_, err := os.Stat(h.Scratch)
	require.NoError(t, err, "the old state stays while its handler runs")
	s.create() // the new generation serves

	s.release(stageScratch)
	r := awaitResult(t, put)
	require.NoError(t, r.err)
	require.Equal(t, http.StatusCreated, r.code, "the handler's state was intact: %s", r.body)
	assert.Contains(t, string(r.body), h.Scratch)
	waitGone(t, h.Scratch)

	s.signal(syscall.SIGTERM)
	require.Equal(t, 143, s.exitCode())
	recoverRoot(t, root, libOrphans)
	requireNothingLeft(t, root)
}

// TestShutdownDrainTimeout: when a handler outlives the drain bound at
// shutdown, tmux is still ended, but the state the handler uses is not
// destroyed: the server exits 143 leaving it, recorded, to recovery.
func TestShutdownDrainTimeout(t *testing.T) {
	requireTmux(t)
	root := newRoot(t)
	s := startServer(t, root, srvOpts{pauseAt: stageScratch, args: []string{"--drain-timeout", "100ms"}})
	var h struct {
		Scratch string `json:"scratch"`
	}
	_, b := s.call("GET", "/healthz", nil)
	require.NoError(t, json.Unmarshal(b, &h))
	si := s.create()
	tmux, pane := openSession(t, si)
	put := s.async("PUT", "/scratch/note", []byte("hello"))
	s.marker(stageScratch)

	s.signal(syscall.SIGTERM)
	require.Equal(t, 143, s.exitCode(), "%s", s.stderr.String())
	awaitResult(t, put) // the connection died with the server
	requireExited(t, tmux, pane)
	_, err := os.Stat(h.Scratch)
	require.NoError(t, err, "state used by a live handler must not be destroyed")
	var kinds []journal.Kind
	for _, r := range records(t, root) {
		kinds = append(kinds, r.Kind)
	}
	assert.Equal(t, []journal.Kind{journal.KindPath}, kinds, "the state stays recorded for recovery")
	assert.Contains(t, s.stderr.String(), "to recovery")
	recoverRoot(t, root, cliAll)
	requireNothingLeft(t, root)
}

// TestShutdownWaitsForCreator: a signal that arrives while a creator is
// admitted (intent published, tmux not yet started) closes the gate — new
// creators are refused — and waits for the admitted one; the tmux server it
// then creates is ended before exit. More signals during the shutdown change
// nothing: the exit status is the first signal's.
func TestShutdownWaitsForCreator(t *testing.T) {
	requireTmux(t)
	by := startBystanders(t)
	root := newRoot(t)
	s := startServer(t, root, srvOpts{pauseAt: stageAfterIntent + "," + stageGateClosed})
	created := s.async("POST", "/sessions", nil)
	s.marker(stageAfterIntent)
	s.signal(syscall.SIGINT)
	s.marker(stageGateClosed)
	code, b := s.call("POST", "/sessions", nil)
	assert.Equal(t, http.StatusServiceUnavailable, code, "%s", b)
	s.signal(syscall.SIGTERM)
	s.signal(syscall.SIGTERM)
	s.release(stageGateClosed)
	s.release(stageAfterIntent)

	r := awaitResult(t, created)
	require.NoError(t, r.err)
	require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
	var si sessionInfo
	require.NoError(t, json.Unmarshal(r.body, &si))
	require.Equal(t, 128+int(syscall.SIGINT), s.exitCode(), "%s", s.stderr.String())
	_, err := os.Lstat(si.Socket)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.Empty(t, records(t, root))
	recoverRoot(t, root, libOrphans)
	requireNothingLeft(t, root)
	by.check(t)
}

// TestScrubbedTmuxEnvironment: every tmux client the server runs — new-session,
// display-message and the kill-server of DELETE and of shutdown — gets a
// scrubbed environment: no TMUX (which would aim it at another server), no
// secret from the server's environment. A spy records each call and then
// runs the real tmux.
func TestScrubbedTmuxEnvironment(t *testing.T) {
	bin := requireTmux(t)
	logDir := t.TempDir()
	spy := filepath.Join(t.TempDir(), "tmux-spy")
	script := fmt.Sprintf("#!/bin/sh\n{ echo \"ARGS $*\"; env; } > %s/call.$$\nexec %s \"$@\"\n", logDir, bin)
	require.NoError(t, os.WriteFile(spy, []byte(script), 0o755))
	root := newRoot(t)
	s := startServer(t, root, srvOpts{
		args: []string{"--tmux", spy},
		env:  []string{"TMUX=/tmp/not-ours,1,0", "OJ_SECRET_TOKEN=hunter2", "TMUX_TMPDIR=/nonexistent"},
	})
	a := s.create()
	s.create()
	code, b := s.call("DELETE", "/sessions/"+a.ID, nil)
	require.Equal(t, http.StatusOK, code, "%s", b)
	s.signal(syscall.SIGTERM)
	require.Equal(t, 143, s.exitCode())

	ents, err := os.ReadDir(logDir)
	require.NoError(t, err)
	seen := map[string]int{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(logDir, e.Name()))
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		args := lines[0]
		for _, verb := range []string{"new-session", "display-message", "kill-server"} {
			if strings.Contains(args, " "+verb) {
				seen[verb]++
			}
		}
		for _, kv := range lines[1:] {
			name, _, _ := strings.Cut(kv, "=")
			switch name {
			case "PATH", "HOME", "SHELL", "LC_ALL", "PWD", "SHLVL", "OLDPWD", "_":
			default:
				t.Errorf("tmux client %q got %q from the server's environment", args, kv)
			}
		}
		assert.Contains(t, lines, "PATH="+fixedPath, args)
	}
	assert.Equal(t, 2, seen["new-session"])
	assert.Equal(t, 2, seen["kill-server"], "DELETE and shutdown each ran kill-server")
	recoverRoot(t, root, libOrphans)
	requireNothingLeft(t, root)
}

// TestDeleteAfterExternalExit: a tmux server that exited behind the server's
// back is confirmed gone on the pidfd held since its creation; DELETE signals
// nothing and cleans up its socket and records.
func TestDeleteAfterExternalExit(t *testing.T) {
	bin := requireTmux(t)
	by := startBystanders(t)
	root := newRoot(t)
	s := startServer(t, root, srvOpts{})
	si := s.create()
	tmux, pane := openSession(t, si)
	require.NoError(t, killServer(context.Background(), bin, si.Socket))
	requireExited(t, tmux, pane)
	code, b := s.call("DELETE", "/sessions/"+si.ID, nil)
	require.Equal(t, http.StatusOK, code, "%s", b)
	assert.NotContains(t, string(b), "SIGTERM")
	assert.Len(t, records(t, root), 1)
	s.signal(syscall.SIGTERM)
	require.Equal(t, 143, s.exitCode())
	recoverRoot(t, root, libOrphans)
	requireNothingLeft(t, root)
	by.check(t)
}

// TestRecoveryIgnoresReusedPID: a record whose subject's PID now belongs to
// another process (really reused: the PID is freed and handed to a new
// process through ns_last_pid) is judged dead by its start time; recovery
// signals nothing and the new process survives.
func TestRecoveryIgnoresReusedPID(t *testing.T) {
	root := newRoot(t)
	r, err := journal.Open(root)
	require.NoError(t, err)
	defer r.Close()
	// An owner that is dead: a process that ran and was reaped.
	dead := exec.Command("true")
	require.NoError(t, dead.Start())
	deadID, err := owner.Of(dead.Process.Pid)
	if err != nil {
		// It exited already; an identity with its PID and a start
		// time no process has is just as dead.
		deadID, err = owner.Self()
		require.NoError(t, err)
		deadID.PID, deadID.StartTime = dead.Process.Pid, 1
	}
	require.NoError(t, dead.Wait())

	var old owner.Identity
	var reused *exec.Cmd
	for attempt := 0; attempt < 100 && reused == nil; attempt++ {
		first := exec.Command("sleep", "100000")
		require.NoError(t, first.Start())
		id, err := owner.Of(first.Process.Pid)
		require.NoError(t, err)
		// Start times have the resolution of a clock tick: let the
		// clock pass the first process's tick, so that the process that
		// gets its PID next cannot share its start time.
		afterTick(t, id.StartTime)
		first.Process.Kill()
		first.Wait()
		// Ask the kernel to hand out the same PID next.
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(id.PID-1)), 0); err != nil {
			t.Skipf("cannot set ns_last_pid to reproduce PID reuse: %v", err)
		}
		next := exec.Command("sleep", "100000")
		require.NoError(t, next.Start())
		nid, err := owner.Of(next.Process.Pid)
		if err == nil && nid.PID == id.PID && nid.StartTime != id.StartTime {
			old, reused = id, next
			break
		}
		next.Process.Kill()
		next.Wait()
	}
	require.NotNil(t, reused, "could not reproduce PID reuse")
	t.Cleanup(func() {
		reused.Process.Kill()
		reused.Wait()
	})
	rp, err := owner.Open(mustOf(t, reused.Process.Pid))
	require.NoError(t, err)
	defer rp.Close()

	rec := &journal.Record{Kind: journal.KindProcess, Label: "reused pid", Subject: &old, PGID: 0, Owner: deadID, Phase: journal.PhaseLive}
	require.NoError(t, r.Publish(context.Background(), rec))
	st, err := recover.Classify(r)
	require.NoError(t, err)
	require.Len(t, st.Entries, 1)
	assert.Equal(t, recover.Stale, st.Entries[0].Verdict, st.Entries[0].Reason)
	recoverRoot(t, root, libOrphans)
	assert.False(t, rp.Exited(), "the process that got the PID must not be signalled")
	requireNothingLeft(t, root)
}

// sessionIdentity is the identity of a session's tmux server, from the
// server's answer (same boot, host and user as the server).
func sessionIdentity(s *srv, si sessionInfo) owner.Identity {
	id := s.proc.Identity()
	id.PID, id.StartTime = si.PID, si.StartTime
	return id
}

// afterTick returns once CLOCK_BOOTTIME, the clock of /proc/PID/stat start
// times, has passed the clock tick tick (USER_HZ is 100 on Linux). It
// sleeps until that instant of the clock: nothing else signals it.
func afterTick(t *testing.T, tick uint64) {
	t.Helper()
	const tickLen = 10 * time.Millisecond
	for {
		var ts unix.Timespec
		require.NoError(t, unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts))
		left := time.Duration(tick+1)*tickLen - time.Duration(ts.Nano())
		if left < 0 {
			return
		}
		time.Sleep(left + time.Millisecond)
	}
}

func mustOf(t *testing.T, pid int) owner.Identity {
	t.Helper()
	id, err := owner.Of(pid)
	require.NoError(t, err)
	return id
}

// TestLateSocketAfterScan: recovery by one participant while another is
// between its intent record and the creation of its socket. Orphans-only
// recovery ends the crashed server's tmux but neither touches the live
// server's record nor removes the root (the admission keeps the exclusive
// lock away); the socket created after the scan belongs to a live tmux
// server that keeps answering. The seed's finding: a directory removed while
// a child could still create a socket in it.
func TestLateSocketAfterScan(t *testing.T) {
	requireTmux(t)
	by := startBystanders(t)
	root := newRoot(t)
	live := startServer(t, root, srvOpts{pauseAt: stageAfterIntent})
	crashed := startServer(t, root, srvOpts{crashAt: stageInHandler + "@2"})
	c1 := crashed.create()
	c1Tmux, c1Pane := openSession(t, c1)
	crashed.async("POST", "/sessions", nil)
	crashed.marker(stageInHandler)
	require.NoError(t, crashed.cmd.Process.Signal(syscall.SIGKILL))
	crashed.exitCode()

	pending := live.async("POST", "/sessions", nil)
	live.marker(stageAfterIntent)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	r, err := journal.Open(root)
	require.NoError(t, err)
	defer r.Close()
	rep, err := recover.Run(ctx, r, recover.Options{Grace: testGrace})
	require.NoError(t, err)
	assert.False(t, rep.RootRemoved, "the root holds a live participant's intent")
	assert.Zero(t, rep.Retained)
	requireExited(t, c1Tmux, c1Pane)
	var intent *journal.Record
	for _, rec := range records(t, root) {
		if rec.Kind == journal.KindTmux {
			require.Nil(t, intent, "only the live server's intent remains")
			intent = rec
		}
	}
	require.NotNil(t, intent)
	assert.Equal(t, journal.PhaseIntent, intent.Phase)
	assert.Equal(t, live.ready.PID, intent.Owner.PID)

	live.release(stageAfterIntent)
	res := awaitResult(t, pending)
	require.NoError(t, res.err)
	require.Equal(t, http.StatusCreated, res.code, "%s", res.body)
	var si sessionInfo
	require.NoError(t, json.Unmarshal(res.body, &si))
	assert.Equal(t, intent.ID, si.ID)
	require.True(t, tmuxAnswers(t, si.Socket))
	// Another orphans-only pass: in use, untouched.
	rep, err = recover.Run(ctx, r, recover.Options{Grace: testGrace})
	require.NoError(t, err)
	assert.False(t, rep.RootRemoved)
	require.True(t, tmuxAnswers(t, si.Socket), "a live server's socket is never unlinked")

	live.signal(syscall.SIGTERM)
	require.Equal(t, 143, live.exitCode())
	recoverRoot(t, root, libOrphans)
	requireNothingLeft(t, root)
	by.check(t)
}

// TestRecoverAllWaitsForAdmittedCreator: `recover --all` by the runner while
// a server's creator is admitted (tmux daemonized, live record pending)
// marks the root closing and waits for the admission; the creator records
// what it made and recovery ends it. Nothing is killed between the scan and a
// creation.
func TestRecoverAllWaitsForAdmittedCreator(t *testing.T) {
	requireTmux(t)
	by := startBystanders(t)
	root := newRoot(t)
	s := startServer(t, root, srvOpts{pauseAt: stageAfterDaemonized})
	pending := s.async("POST", "/sessions", nil)
	s.marker(stageAfterDaemonized)

	r, err := journal.Open(root)
	require.NoError(t, err)
	defer r.Close()
	type out struct {
		rep *recover.Report
		err error
	}
	done := make(chan out, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		rep, err := recover.Run(ctx, r, recover.Options{All: true, Grace: testGrace})
		done <- out{rep, err}
	}()
	// The closing marker: recovery has begun and waits for the lock.
	testroot.WaitFileWithin(t, filepath.Join(root, "closing"), s.proc.Identity().PID, waitTimeout)
	select {
	case o := <-done:
		require.FailNow(t, "recovery finished while a creator was admitted", "%+v %v", o.rep, o.err)
	default:
	}
	s.release(stageAfterDaemonized)
	res := awaitResult(t, pending)
	require.NoError(t, res.err)
	require.Equal(t, http.StatusCreated, res.code, "an admitted creator may finish: %s", res.body)
	var si sessionInfo
	require.NoError(t, json.Unmarshal(res.body, &si))
	code, b, err := s.do("POST", "/sessions", nil)
	if err == nil {
		assert.Equal(t, http.StatusServiceUnavailable, code, "the root is closing: %s", b)
	}
	// Recovery ends the new tmux server (in use: --all), then waits for
	// the server's lease: stop the server so that it can finish.
	s.signal(syscall.SIGTERM)
	require.Equal(t, 143, s.exitCode())
	var o out
	select {
	case o = <-done:
	case <-time.After(waitTimeout):
		require.FailNow(t, "recovery did not finish")
	}
	require.NoError(t, o.err)
	assert.Equal(t, owner.Dead, owner.Check(sessionIdentity(s, si)).State, "the tmux server created under the admission is ended")
	if _, err := os.Lstat(root); err == nil {
		recoverRoot(t, root, libAll)
	}
	requireNothingLeft(t, root)
	by.check(t)
}

// TestFinalSweepAfterCreatorWait: a creator still admitted when the bounded
// wait for creators runs out at shutdown or reset is not abandoned. Its
// generation keeps the state; when it has finished, the final sweep ends
// the tmux server it made (at shutdown after draining handlers, just before
// exit; at reset when its last creator and handler have left).
func TestFinalSweepAfterCreatorWait(t *testing.T) {
	requireTmux(t)
	for _, tc := range []struct {
		name  string
		stage string // where the server pauses, after giving up the wait
		begin func(s *srv) <-chan result
	}{
		{"shutdown", stageShutdownAfterKill, func(s *srv) <-chan result { s.signal(syscall.SIGTERM); return nil }},
		{"reset", stageResetAfterKill, func(s *srv) <-chan result { return s.async("POST", "/reset", nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := newRoot(t)
			s := startServer(t, root, srvOpts{
				pauseAt: stageAfterIntent + "," + tc.stage,
				args:    []string{"--creator-wait", "50ms"},
			})
			var h struct {
				Scratch string `json:"scratch"`
			}
			_, b := s.call("GET", "/healthz", nil)
			require.NoError(t, json.Unmarshal(b, &h))
			created := s.async("POST", "/sessions", nil)
			s.marker(stageAfterIntent)
			reset := tc.begin(s)
			s.marker(tc.stage) // the wait for creators gave up
			s.release(stageAfterIntent)
			r := awaitResult(t, created)
			require.NoError(t, r.err)
			require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
			var si sessionInfo
			require.NoError(t, json.Unmarshal(r.body, &si))
			s.release(tc.stage)
			if reset != nil {
				rr := awaitResult(t, reset)
				require.NoError(t, rr.err)
				require.Equal(t, http.StatusOK, rr.code, "%s", rr.body)
				// The old generation goes once its creator has left.
				waitGone(t, h.Scratch)
				assert.Equal(t, owner.Dead, owner.Check(sessionIdentity(s, si)).State, "the late tmux server was swept")
				s.signal(syscall.SIGTERM)
			}
			require.Equal(t, 143, s.exitCode(), "%s", s.stderr.String())
			assert.Equal(t, owner.Dead, owner.Check(sessionIdentity(s, si)).State, "the late tmux server was swept")
			_, err := os.Lstat(si.Socket)
			require.ErrorIs(t, err, fs.ErrNotExist)
			assert.Empty(t, records(t, root))
			recoverRoot(t, root, libOrphans)
			requireNothingLeft(t, root)
		})
	}
}

// TestUnsafeRootRefused: a root that is group/world accessible or a symlink
// is refused with an error naming it (never "fixed", never used): nobody
// else can have planted a socket or record in a root the server uses.
func TestUnsafeRootRefused(t *testing.T) {
	// Short paths: a root must leave room for socket names.
	base, err := os.MkdirTemp("", "ojbad")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	open := filepath.Join(base, "open")
	require.NoError(t, os.Mkdir(open, 0o700))
	require.NoError(t, os.Chmod(open, 0o755))
	private := filepath.Join(base, "private")
	require.NoError(t, os.Mkdir(private, 0o700))
	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(private, link))
	for _, tc := range []struct{ name, root, why string }{
		{"group and world readable", open, "accessible to group or others"},
		{"symlink", link, "symlink"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, tc.root, srvOpts{noReady: true})
			require.Equal(t, exitFail, s.exitCode())
			assert.Contains(t, s.stderr.String(), "unsafe root")
			assert.Contains(t, s.stderr.String(), tc.root)
			assert.Contains(t, s.stderr.String(), tc.why)
			for _, d := range []string{open, private} {
				ents, err := os.ReadDir(d)
				require.NoError(t, err)
				assert.Empty(t, ents, "nothing created in %s", d)
			}
			fi, err := os.Stat(open)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "never repaired")
		})
	}
}
