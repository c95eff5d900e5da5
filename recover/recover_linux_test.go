package recover

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// TestClassify: every verdict, from real processes; Classify changes
// nothing.
func TestClassify(t *testing.T) {
	t.Parallel()
	r, dir := openRoot(t)
	self, err := owner.Self()
	require.NoError(t, err)
	dead := deadIdentity(t)
	live := startSleeper(t).ID

	otherHost := live
	otherHost.Host += ".elsewhere"
	otherUID := live
	otherUID.UID++
	earlierBoot := dead
	earlierBoot.BootID = "00000000-0000-0000-0000-000000000000"
	reused := live
	reused.StartTime++

	tests := []struct {
		name    string
		rec     *journal.Record
		verdict Verdict
		reason  string
	}{
		{"owner alive", &journal.Record{Subject: &live, Owner: self}, InUse, "owner alive"},
		{"owner alive, subject dead", &journal.Record{Subject: &dead, Owner: self}, InUse, "owner alive"},
		{"owner dead, subject alive", &journal.Record{Subject: &live, Owner: dead}, Orphan, "subject alive"},
		{"owner dead, subject dead", &journal.Record{Subject: &dead, Owner: dead}, Stale, "subject dead"},
		{"owner dead, subject PID reused", &journal.Record{Subject: &reused, Owner: dead}, Stale, "reused"},
		{"owner from an earlier boot", &journal.Record{Subject: &live, Owner: earlierBoot}, Orphan, "earlier boot"},
		{"owner on another host", &journal.Record{Subject: &live, Owner: otherHost}, Unknown, "recorded on host"},
		{"subject on another host", &journal.Record{Subject: &otherHost, Owner: dead}, Unknown, "recorded on host"},
		{"subject runs as another uid", &journal.Record{Subject: &otherUID, Owner: dead}, Unknown, "runs as uid"},
		{"path record, owner dead", &journal.Record{Kind: journal.KindPath, Owner: dead, Paths: []string{"scratch"}}, Stale, "no subject"},
		{"intent without subject, owner dead", &journal.Record{Owner: dead, Phase: journal.PhaseIntent}, Unknown, "before its intent record named a subject"},
		{"process intent with only paths, owner dead", &journal.Record{Owner: dead, Phase: journal.PhaseIntent, Paths: []string{"scratch-i"}}, Unknown, "names no cgroup or socket"},
		{"intent with a cgroup, owner dead", &journal.Record{Owner: dead, Phase: journal.PhaseIntent, Cgroup: "/sys/fs/cgroup/oj-test-intent"}, Stale, "no subject"},
		{"tmux intent with a socket, owner dead", &journal.Record{Kind: journal.KindTmux, Owner: dead, Phase: journal.PhaseIntent, Sockets: []string{"t-i"}}, Stale, "no subject"},
		{"path intent, owner dead", &journal.Record{Kind: journal.KindPath, Owner: dead, Phase: journal.PhaseIntent, Paths: []string{"scratch-p"}}, Stale, "no subject"},
	}
	ids := map[string]int{}
	for i, tt := range tests {
		ids[publish(t, r, tt.rec).ID] = i
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "records", "1-2-0badf00d.json"), []byte(`{"version": 1, "id": "1-2-0bad`), 0o600))
	before := snapshot(t, dir)

	st, err := Classify(r)
	require.NoError(t, err)
	require.Len(t, st.Entries, len(tests)+1)
	seen := map[int]bool{}
	for _, e := range st.Entries {
		if e.Record == nil {
			assert.Equal(t, Corrupt, e.Verdict, e.Path)
			assert.Contains(t, e.Reason, "not a record")
			continue
		}
		i := ids[e.Record.ID]
		seen[i] = true
		tt := tests[i]
		assert.Equal(t, tt.verdict, e.Verdict, "%s: %s", tt.name, e.Reason)
		assert.Contains(t, e.Reason, tt.reason, tt.name)
	}
	assert.Len(t, seen, len(tests))
	assert.Equal(t, before, snapshot(t, dir), "Classify must change nothing")
	requireState(t, owner.Alive, live, "subject")
}

// TestClassifyLease: a held lease proves its owner alive and a free one
// proves it dead, whatever its PID says.
func TestClassifyLease(t *testing.T) {
	t.Parallel()
	r, _ := openRoot(t)
	live := startSleeper(t).ID
	// The test process holds its lease: its records are in use.
	_, err := r.Lease()
	require.NoError(t, err)
	self, err := owner.Self()
	require.NoError(t, err)
	rec := publish(t, r, &journal.Record{Subject: &live, Owner: self})
	st, err := Classify(r)
	require.NoError(t, err)
	require.Len(t, st.Entries, 1)
	require.Equal(t, InUse, st.Entries[0].Verdict)
	require.Contains(t, st.Entries[0].Reason, "holds its lease")

	// Released (the file stays while its lock is free): the owner counts as
	// dead although it runs.
	lease, err := os.OpenFile(filepath.Join(r.Path(), "leases", fmt.Sprintf("%d-%d-%d-%s", self.PID, self.StartTime, self.PIDNS, self.BootID)), os.O_RDONLY, 0)
	require.NoError(t, err)
	defer lease.Close()
	require.NoError(t, r.ReleaseLease())
	require.NoError(t, os.WriteFile(lease.Name(), nil, 0o600))
	st, err = Classify(r)
	require.NoError(t, err)
	require.Len(t, st.Entries, 1)
	require.Equal(t, Orphan, st.Entries[0].Verdict, st.Entries[0].Reason)
	require.Contains(t, st.Entries[0].Reason, "lease is free")
	require.NoError(t, r.Retire(rec.ID))
	require.NoError(t, os.Remove(lease.Name()))
}

// mixedRoot is a root with one orphan, one stale record with a scratch path,
// and one record in use (owned by the test process).
type mixedRoot struct {
	r                  *journal.Root
	dir                string
	orphan, inUse      *sleeper
	orphanID, staleID  string
	inUseID, scratchID string
}

func newMixedRoot(t *testing.T) *mixedRoot {
	t.Helper()
	m := &mixedRoot{}
	m.r, m.dir = openRoot(t)
	dead := deadIdentity(t)
	self, err := owner.Self()
	require.NoError(t, err)
	m.orphan, m.inUse = startSleeper(t), startSleeper(t)
	require.NoError(t, os.MkdirAll(filepath.Join(m.dir, "scratch", "deep"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(m.dir, "scratch", "deep", "f"), []byte("x"), 0o600))
	m.orphanID = publish(t, m.r, &journal.Record{Label: "orphan", Subject: &m.orphan.ID, Owner: dead}).ID
	m.staleID = publish(t, m.r, &journal.Record{Label: "stale", Subject: &dead, Owner: dead}).ID
	m.scratchID = publish(t, m.r, &journal.Record{Kind: journal.KindPath, Label: "scratch", Owner: dead, Paths: []string{"scratch"}}).ID
	m.inUseID = publish(t, m.r, &journal.Record{Label: "in use", Subject: &m.inUse.ID, Owner: self}).ID
	return m
}

// TestRunModes: what each mode does to orphans, stale records, records in
// use and the root.
func TestRunModes(t *testing.T) {
	t.Run("orphans only", func(t *testing.T) {
		t.Parallel()
		m := newMixedRoot(t)
		rep, err := Run(context.Background(), m.r, Options{Grace: 5 * time.Second})
		require.NoError(t, err)
		require.Equal(t, "orphans", rep.Mode)
		require.True(t, rep.Clean(), "%+v", rep)
		assert.Contains(t, strings.Join(actionFor(t, rep, m.orphanID).Done, "; "), "SIGTERM to pid")
		assert.Contains(t, actionFor(t, rep, m.scratchID).Done, "removed scratch")
		assert.Empty(t, actionFor(t, rep, m.inUseID).Done)
		requireState(t, owner.Dead, m.orphan.ID, "orphan")
		requireState(t, owner.Alive, m.inUse.ID, "subject in use")
		assert.NoDirExists(t, filepath.Join(m.dir, "scratch"))
		// The root stays: a record is in use. That is not a failure.
		assert.False(t, rep.RootRemoved)
		assert.Contains(t, rep.RootKept, "record "+m.inUseID)
		assert.DirExists(t, m.dir)
		recs := records(t, m.r)
		assert.Equal(t, []string{m.inUseID}, recs)
	})
	t.Run("all", func(t *testing.T) {
		t.Parallel()
		m := newMixedRoot(t)
		rep, err := Run(context.Background(), m.r, Options{All: true, Grace: 5 * time.Second})
		require.NoError(t, err)
		require.Equal(t, "all", rep.Mode)
		require.True(t, rep.Clean(), "%+v", rep)
		require.True(t, rep.RootRemoved, rep.RootKept)
		requireState(t, owner.Dead, m.orphan.ID, "orphan")
		requireState(t, owner.Dead, m.inUse.ID, "subject in use")
		assert.NoDirExists(t, m.dir)
		// The root is gone: new admissions through the old handle fail.
		_, err = m.r.Admit(context.Background())
		assert.ErrorIs(t, err, journal.ErrClosing)
	})
	t.Run("dry run", func(t *testing.T) {
		t.Parallel()
		m := newMixedRoot(t)
		before := snapshot(t, m.dir)
		for _, all := range []bool{false, true} {
			rep, err := Run(context.Background(), m.r, Options{All: all, DryRun: true})
			require.NoError(t, err)
			require.True(t, rep.DryRun)
			assert.Contains(t, strings.Join(actionFor(t, rep, m.orphanID).Done, "; "), "would terminate")
			assert.Contains(t, actionFor(t, rep, m.scratchID).Done, "would remove scratch")
			assert.False(t, rep.RootRemoved)
		}
		assert.Equal(t, before, snapshot(t, m.dir), "a dry run must change nothing")
		requireState(t, owner.Alive, m.orphan.ID, "orphan")
		requireState(t, owner.Alive, m.inUse.ID, "subject in use")
	})
	t.Run("keep root", func(t *testing.T) {
		t.Parallel()
		m := newMixedRoot(t)
		rep, err := Run(context.Background(), m.r, Options{All: true, KeepRoot: true, Grace: 5 * time.Second})
		require.NoError(t, err)
		require.True(t, rep.Clean(), "%+v", rep)
		require.False(t, rep.RootRemoved)
		require.Contains(t, rep.RootKept, "kept as asked")
		requireState(t, owner.Dead, m.inUse.ID, "subject in use")
		assert.Empty(t, records(t, m.r))
		assert.DirExists(t, m.dir)
	})
}

func records(t *testing.T, r *journal.Root) []string {
	t.Helper()
	scan, err := r.Scan()
	require.NoError(t, err)
	var ids []string
	for _, rec := range scan.Records {
		ids = append(ids, rec.ID)
	}
	return ids
}

// snapshot describes a directory tree: names, types, modes and contents.
// Nothing is followed.
func snapshot(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", strings.TrimPrefix(p, dir), fi.Mode())
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += " " + string(b)
		}
		out = append(out, line)
		return nil
	}))
	sort.Strings(out)
	return out
}

// TestTerminate: SIGTERM first, SIGKILL after the grace period only when
// needed; a process group is ended as a whole, also after its leader exited,
// through the pidfd opened while the leader lived.
func TestTerminate(t *testing.T) {
	tests := []struct {
		name      string
		env       []string
		group     bool
		leaderDie bool // the leader exits before Terminate; members remain
		killed    bool // SIGKILL was needed
	}{
		{"process", nil, false, false, false},
		{"process ignoring SIGTERM", []string{envIgnoreTerm + "=1"}, false, false, true},
		{"group", []string{envPgrp + "=1", envMembers + "=2"}, true, false, false},
		{"group ignoring SIGTERM", []string{envPgrp + "=1", envMembers + "=2", envIgnoreTerm + "=1"}, true, false, true},
		{"group whose leader exited", []string{envPgrp + "=1", envMembers + "=2", envIgnoreTerm + "=1"}, true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startSleeper(t, tt.env...)
			p, err := owner.Open(s.ID)
			require.NoError(t, err)
			defer p.Close()
			if tt.leaderDie {
				s.Kill()
				for _, m := range s.Members {
					requireState(t, owner.Alive, m, "member")
				}
			}
			const grace = 300 * time.Millisecond
			msgs, err := Terminate(context.Background(), p, tt.group, grace)
			require.NoError(t, err, "%v", msgs)
			joined := strings.Join(msgs, "; ")
			if tt.killed {
				m := regexp.MustCompile(`still running after (\S+) \(grace 300ms\)`).FindStringSubmatch(joined)
				require.NotNil(t, m, joined)
				measured, err := time.ParseDuration(m[1])
				require.NoError(t, err)
				assert.GreaterOrEqual(t, measured, grace, "SIGKILL came before the grace elapsed: %s", joined)
				assert.Contains(t, joined, "SIGKILL to ")
			} else {
				assert.Regexp(t, `^SIGTERM to (pid|process group) \d+: exited after`, joined)
			}
			if !tt.leaderDie {
				requireState(t, owner.Dead, s.ID, "leader")
			}
			for _, m := range s.Members {
				requireState(t, owner.Dead, m, "member")
			}
			if tt.group {
				alive, err := owner.GroupAlive(s.ID.PID)
				require.NoError(t, err)
				assert.False(t, alive, "the group must be empty")
			}
			if strings.Contains(tt.name, "ignoring") && !tt.leaderDie {
				assert.FileExists(t, readyPath(s.Child, "term"), "SIGTERM must come first")
			}
		})
	}
}

// TestTerminateRefusesSelf: the recoverer never signals itself or its own
// process group.
func TestTerminateRefusesSelf(t *testing.T) {
	self, err := owner.Self()
	require.NoError(t, err)
	_, err = owner.Open(self)
	require.ErrorIs(t, err, owner.ErrRefused)
	r, _ := openRoot(t)
	rec := publish(t, r, &journal.Record{Subject: &self, Owner: deadIdentity(t)})
	rep, err := Run(context.Background(), r, Options{Grace: time.Second})
	require.NoError(t, err)
	a := actionFor(t, rep, rec.ID)
	require.Equal(t, Orphan, a.Verdict)
	require.Contains(t, a.Retained, "refusing to signal self")
	require.False(t, rep.Clean())
	require.False(t, rep.RootRemoved)
}

// TestSockets: a recorded socket is checked, not trusted. A silent socket of
// ours is unlinked; one that answers, one that is not a socket, and one that
// belongs to another user are retained and left in place.
func TestSockets(t *testing.T) {
	const nobody = 65534
	tests := []struct {
		name     string
		make     func(t *testing.T, path string)
		retained string // "" when the socket must be unlinked
	}{
		{"silent socket", func(t *testing.T, path string) { bindSilent(t, path) }, ""},
		{"gone already", func(t *testing.T, path string) {}, ""},
		{"answering socket", func(t *testing.T, path string) {
			l, err := net.Listen("unix", path)
			require.NoError(t, err)
			t.Cleanup(func() { l.Close() })
		}, "still answers"},
		{"regular file", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, []byte("data"), 0o600))
		}, "not a socket"},
		{"symlink to a socket", func(t *testing.T, path string) {
			target := filepath.Join(testroot.Dir(t), "s")
			bindSilent(t, target)
			require.NoError(t, os.Symlink(target, path))
		}, "not a socket"},
		{"socket of another user", func(t *testing.T, path string) {
			bindSilent(t, path)
			require.NoError(t, os.Lchown(path, nobody, -1))
		}, "not owned by uid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, dir := openRoot(t)
			path := filepath.Join(dir, "app.sock")
			tt.make(t, path)
			before, _ := os.Lstat(path)
			rec := publish(t, r, &journal.Record{Kind: journal.KindPath, Owner: deadIdentity(t), Sockets: []string{"app.sock"}})
			rep, err := Run(context.Background(), r, Options{Grace: time.Second})
			require.NoError(t, err)
			a := actionFor(t, rep, rec.ID)
			if tt.retained == "" {
				require.Empty(t, a.Retained)
				require.True(t, rep.RootRemoved, rep.RootKept)
				require.NoDirExists(t, dir)
				return
			}
			require.Contains(t, a.Retained, tt.retained)
			require.False(t, rep.Clean())
			require.False(t, rep.RootRemoved)
			after, err := os.Lstat(path)
			require.NoError(t, err, "the socket path must be left in place")
			require.True(t, os.SameFile(before, after))
			require.Equal(t, []string{rec.ID}, records(t, r))
		})
	}
}

// bindSilent leaves a Unix socket at path with nobody listening (a server
// that died without unlinking it).
func bindSilent(t *testing.T, path string) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	require.NoError(t, err)
	l.SetUnlinkOnClose(false)
	require.NoError(t, l.Close())
}

// TestTmuxKillServerScrubbedEnv: a tmux record's server is stopped with
// `tmux -S SOCKET kill-server`, run with a minimal scrubbed environment:
// TMUX (here pointing at a bystander's server) and every other variable of
// the recoverer stay out. The socket is unlinked once nothing answers, and
// the bystander survives.
func TestTmuxKillServerScrubbedEnv(t *testing.T) {
	r, dir := openRoot(t)
	other := testroot.Dir(t)
	mine := filepath.Join(other, "mine.sock")
	mineID := startTmux(t, mine)
	sock := filepath.Join(dir, "s")
	srv := startTmux(t, sock)

	// A tmux wrapper that records the environment it was started with.
	envFile := filepath.Join(other, "env")
	wrapper := filepath.Join(other, "tmux")
	tmux, err := exec.LookPath("tmux")
	require.NoError(t, err, "tmux must be installed")
	script := fmt.Sprintf("#!/bin/sh\n/usr/bin/env > %s\nexec %s \"$@\"\n", envFile, tmux)
	require.NoError(t, os.WriteFile(wrapper, []byte(script), 0o700))

	t.Setenv("TMUX", mine+","+fmt.Sprint(mineID.PID)+",0")
	t.Setenv("OJ_SECRET_TOKEN", "hunter2")
	rec := publish(t, r, &journal.Record{Kind: journal.KindTmux, Label: "tmux", Subject: &srv, PGID: srv.PID, Owner: deadIdentity(t), Sockets: []string{"s"}})
	rep, err := Run(context.Background(), r, Options{Grace: 5 * time.Second, Tmux: wrapper})
	require.NoError(t, err)
	a := actionFor(t, rep, rec.ID)
	require.Empty(t, a.Retained)
	require.Contains(t, a.Done, "tmux kill-server on s")
	require.Contains(t, a.Done, "unlinked socket s")
	require.True(t, rep.RootRemoved, rep.RootKept)

	env, err := os.ReadFile(envFile)
	require.NoError(t, err, "the wrapper must have run")
	lines := strings.Fields(string(env))
	sort.Strings(lines)
	// sh adds PWD (cmd.Dir is /) to what it exports.
	assert.Equal(t, []string{"HOME=/", "LC_ALL=C", "PATH=" + tmuxPath, "PWD=/"}, lines)
	requireState(t, owner.Dead, srv, "tmux server")
	requireState(t, owner.Alive, mineID, "bystander tmux server")
	require.NoError(t, tmuxCmd(mine, "has-session").Run(), "the bystander must still answer")
}

func tmuxCmd(socket string, args ...string) *exec.Cmd {
	cmd := exec.Command("tmux", append([]string{"-f", "/dev/null", "-S", socket}, args...)...)
	cmd.Env, cmd.Dir = []string{"PATH=/usr/bin:/bin", "HOME=/"}, "/"
	return cmd
}

// startTmux starts a real tmux server on socket and returns its identity; it
// is killed at cleanup.
func startTmux(t *testing.T, socket string) owner.Identity {
	t.Helper()
	out, err := tmuxCmd(socket, "new-session", "-d", "-s", "oj", "sleep 3600").CombinedOutput()
	require.NoError(t, err, "tmux must be installed: %s", out)
	t.Cleanup(func() {
		tmuxCmd(socket, "kill-server").Run()
		os.Remove(socket)
	})
	out, err = tmuxCmd(socket, "display-message", "-p", "#{pid}").Output()
	require.NoError(t, err)
	var pid int
	_, err = fmt.Sscan(string(bytes.TrimSpace(out)), &pid)
	require.NoError(t, err)
	id, err := owner.Of(pid)
	require.NoError(t, err)
	return id
}

// TestRemovePaths: recorded paths go deepest first; a symlink inside them
// is removed itself, its target outside the root is never followed.
func TestRemovePaths(t *testing.T) {
	t.Parallel()
	r, dir := openRoot(t)
	outside := testroot.Dir(t)
	require.NoError(t, os.WriteFile(filepath.Join(outside, "keep"), []byte("precious"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "a", "b", "c"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a", "b", "c", "f"), []byte("x"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "a", "b", "escape")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "keep"), filepath.Join(dir, "link")))
	rec := publish(t, r, &journal.Record{Kind: journal.KindPath, Owner: deadIdentity(t), Paths: []string{"a", "a/b/c", "link", "never-created"}})
	rep, err := Run(context.Background(), r, Options{})
	require.NoError(t, err)
	a := actionFor(t, rep, rec.ID)
	require.Empty(t, a.Retained)
	// Deepest first: the nested path is reported before its parent.
	require.Equal(t, []string{"removed a/b/c", "removed a", "removed link", "removed never-created", "retired"}, a.Done)
	require.True(t, rep.RootRemoved, rep.RootKept)
	b, err := os.ReadFile(filepath.Join(outside, "keep"))
	require.NoError(t, err)
	require.Equal(t, "precious", string(b))
}

// TestRecoverAfterAnotherRecoverer: a recoverer that opened the root before
// another one removed it finds nothing left to do: that is progress, not an
// error, in either mode.
func TestRecoverAfterAnotherRecoverer(t *testing.T) {
	for _, all := range []bool{false, true} {
		t.Run(fmt.Sprintf("all=%v", all), func(t *testing.T) {
			t.Parallel()
			r, dir := openRoot(t)
			orphan := startSleeper(t)
			publish(t, r, &journal.Record{Subject: &orphan.ID, Owner: deadIdentity(t)})
			late, err := journal.Open(dir)
			require.NoError(t, err)
			defer late.Close()

			rep, err := Run(context.Background(), r, Options{All: all, Grace: 5 * time.Second})
			require.NoError(t, err)
			require.True(t, rep.RootRemoved, rep.RootKept)

			rep, err = Run(context.Background(), late, Options{All: all, Grace: 5 * time.Second})
			require.NoError(t, err, "the root is gone: nothing is left to do")
			require.True(t, rep.Clean(), "%+v", rep)
			require.True(t, rep.RootRemoved)
			require.NoDirExists(t, dir)
		})
	}
}

// TestCrashRecovererAtStage: a recoverer SIGKILLed at each marked stage of
// Run leaves a root that the next recoverer finishes: every orphan gone,
// every record retired, the root removed.
func TestCrashRecovererAtStage(t *testing.T) {
	for _, stage := range []string{"classified", "signalled", "retired", "removing"} {
		for _, all := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/all=%v", stage, all), func(t *testing.T) {
				t.Parallel()
				r, dir := openRoot(t)
				dead := deadIdentity(t)
				var orphans []owner.Identity
				for i := 0; i < 2; i++ {
					s := startSleeper(t)
					orphans = append(orphans, s.ID)
					publish(t, r, &journal.Record{Subject: &s.ID, Owner: dead})
				}
				require.NoError(t, os.Mkdir(filepath.Join(dir, "scratch"), 0o700))
				publish(t, r, &journal.Record{Kind: journal.KindPath, Owner: dead, Paths: []string{"scratch"}})

				env := []string{envRoot + "=" + dir, envStage + "=" + stage}
				if all {
					env = append(env, envAll+"=1")
				}
				c := testroot.Start(t, "recoverer", env...)
				c.WaitReady(stage)
				c.Kill()

				rep, err := Run(context.Background(), r, Options{All: all, Grace: 5 * time.Second})
				require.NoError(t, err)
				require.True(t, rep.Clean(), "%+v", rep)
				for _, id := range orphans {
					requireState(t, owner.Dead, id, "orphan")
				}
				require.NoDirExists(t, filepath.Join(dir, "scratch"))
				if !rep.RootRemoved {
					// An orphans-only recoverer may keep a root it finds
					// empty (it may be a new participant's); the run's
					// own teardown (All) must remove it.
					require.False(t, all, "--all must remove the root: %s", rep.RootKept)
					require.NotEmpty(t, rep.RootKept)
					require.Empty(t, records(t, r))
					rep, err = Run(context.Background(), r, Options{All: true, Grace: 5 * time.Second})
					require.NoError(t, err)
				}
				require.True(t, rep.RootRemoved, rep.RootKept)
				require.NoDirExists(t, dir)
			})
		}
	}
}

// TestGuard: signals that arrive while the cleanup runs never cut it short;
// the cleanup runs once although two goroutines ask for it; the process
// exits with the first signal's 128+n.
func TestGuard(t *testing.T) {
	c := testroot.Start(t, "guard")
	c.WaitReady("armed")
	require.NoError(t, c.Cmd.Process.Signal(syscall.SIGTERM))
	c.WaitReady("cleaning")
	require.NoError(t, c.Cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, c.Cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, c.Cmd.Process.Signal(syscall.SIGTERM))
	c.Send("finish")
	require.Equal(t, "runs=1 err=<nil>", string(c.WaitReady("cleaned")))
	err := c.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 128+int(syscall.SIGTERM), ee.ExitCode(), "exit status, not death by signal")
}

// TestGuardWithoutSignal: without a signal the exit code reports the
// cleanup's outcome, and concurrent callers get its one error.
func TestGuardWithoutSignal(t *testing.T) {
	calls := 0
	_, g := NewGuard(context.Background(), func(context.Context) error {
		calls++
		return fmt.Errorf("cleanup failed")
	})
	defer g.Stop()
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() { errs <- g.Cleanup() }()
	}
	for i := 0; i < 3; i++ {
		require.EqualError(t, <-errs, "cleanup failed")
	}
	require.Equal(t, 1, calls)
	require.Nil(t, g.Signal())
	require.Equal(t, 1, g.ExitCode())
}

// TestAllKeepRootReopens: a teardown that keeps the root (a daemon ending
// its own run, --all --keep-root) leaves it admitting again; a closing
// marker left behind would refuse every later admission.
func TestAllKeepRootReopens(t *testing.T) {
	r, dir := openRoot(t)
	s := startSleeper(t)
	publish(t, r, &journal.Record{Subject: &s.ID, Owner: deadIdentity(t)})
	rep, err := Run(context.Background(), r, Options{All: true, KeepRoot: true, Grace: 5 * time.Second})
	require.NoError(t, err)
	require.True(t, rep.Clean(), "%+v", rep)
	require.False(t, rep.RootRemoved)
	requireState(t, owner.Dead, s.ID, "orphan")
	require.DirExists(t, dir)
	closing, err := r.Closing()
	require.NoError(t, err)
	require.False(t, closing, "the closing marker outlived the teardown")
	adm, err := r.Admit(context.Background())
	require.NoError(t, err)
	adm.Done()
}

// TestDeadLeaderLiveGroupRetained: a recorded group whose leader died
// before recovery could hold its pidfd, while a member no record names
// lives on, cannot be signalled safely (invariant 5). Recovery must not call
// that done: the record and the root stay, and the member is untouched.
func TestDeadLeaderLiveGroupRetained(t *testing.T) {
	r, dir := openRoot(t)
	memberFile := filepath.Join(t.TempDir(), "member")
	leader := exec.Command("sh", "-c", `sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > `+memberFile+`.tmp && mv `+memberFile+`.tmp `+memberFile+`; read x || true`)
	leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := leader.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, leader.Start())
	lid, err := owner.Of(leader.Process.Pid)
	require.NoError(t, err)
	b := testroot.WaitFile(t, memberFile, leader.Process.Pid)
	mpid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	mid, err := owner.Of(mpid)
	require.NoError(t, err)
	t.Cleanup(func() {
		if p, err := owner.Open(mid); err == nil {
			p.Signal(syscall.SIGKILL)
			p.Wait(context.Background())
			p.Close()
		}
		syscall.Wait4(mpid, nil, syscall.WNOHANG, nil)
	})
	publish(t, r, &journal.Record{Subject: &lid, PGID: lid.PID, Owner: deadIdentity(t)})
	stdin.Close()
	require.NoError(t, leader.Wait())
	requireState(t, owner.Dead, lid, "leader")

	for _, all := range []bool{false, true} {
		rep, err := Run(context.Background(), r, Options{All: all, Grace: time.Second})
		require.NoError(t, err)
		require.False(t, rep.Clean(), "a live member of the recorded group must keep the record: %+v", rep)
		require.False(t, rep.RootRemoved)
		require.DirExists(t, dir)
		require.Len(t, records(t, r), 1)
		requireState(t, owner.Alive, mid, "the group member (never signalled without the leader's pidfd)")
	}
}

// TestAllWaitIsBounded: a creator that never finishes its admission cannot
// hang the run's teardown. After Wait, All gives up without ending anything
// (ending without the exclusive lock would let the creator create after the
// scan), keeps the root closing and reports it retained; once the creator
// is done, a second teardown finishes.
func TestAllWaitIsBounded(t *testing.T) {
	r, dir := openRoot(t)
	s := startSleeper(t)
	publish(t, r, &journal.Record{Subject: &s.ID, Owner: deadIdentity(t)})
	creator, err := journal.Open(dir)
	require.NoError(t, err)
	defer creator.Close()
	adm, err := creator.Admit(context.Background())
	require.NoError(t, err)

	rep, err := Run(context.Background(), r, Options{All: true, Grace: time.Second, Wait: 200 * time.Millisecond})
	require.NoError(t, err)
	require.False(t, rep.Clean())
	require.Contains(t, rep.RootKept, "admitted creators still hold")
	requireState(t, owner.Alive, s.ID, "the orphan (nothing is ended without the exclusive lock)")
	_, err = creator.Admit(context.Background())
	require.ErrorIs(t, err, journal.ErrClosing, "the root stays closing")

	adm.Done()
	rep, err = Run(context.Background(), r, Options{All: true, Grace: time.Second, Wait: 10 * time.Second})
	require.NoError(t, err)
	require.True(t, rep.Clean(), "%+v", rep)
	require.True(t, rep.RootRemoved, rep.RootKept)
	requireState(t, owner.Dead, s.ID, "orphan")
}

// TestOrphanChain: ending an orphan orphans what it owned (a server killed
// as its dead supervisor's subject leaves its own records with a dead
// owner). One orphans-only recovery follows the chain to the end.
func TestOrphanChain(t *testing.T) {
	r, dir := openRoot(t)
	server := startSleeper(t)
	tmux := startSleeper(t)
	publish(t, r, &journal.Record{Subject: &server.ID, Owner: deadIdentity(t), Label: "server"})
	publish(t, r, &journal.Record{Subject: &tmux.ID, Owner: server.ID, Label: "owned by the server"})
	rep, err := Run(context.Background(), r, Options{Grace: 5 * time.Second})
	require.NoError(t, err)
	require.True(t, rep.Clean(), "%+v", rep)
	requireState(t, owner.Dead, server.ID, "server")
	requireState(t, owner.Dead, tmux.ID, "what the server owned")
	require.True(t, rep.RootRemoved, rep.RootKept)
	require.NoDirExists(t, dir)
	require.Len(t, rep.Actions, 2)
	for _, a := range rep.Actions {
		require.Equal(t, Orphan, a.Verdict, "%+v", a)
	}
}

// TestTerminateHonoursContext: a context that ends during the grace period
// (a recovery's deadline) stops the escalation: no SIGKILL, an error that
// names the cause, and no message claiming a wait that was not made.
func TestTerminateHonoursContext(t *testing.T) {
	t.Parallel()
	s := startSleeper(t, envIgnoreTerm+"=1")
	p, err := owner.Open(s.ID)
	require.NoError(t, err)
	defer p.Close()
	cause := errors.New("deadline exceeded after 1h")
	ctx, cancel := context.WithTimeoutCause(context.Background(), 200*time.Millisecond, cause)
	defer cancel()
	t0 := time.Now()
	msgs, err := Terminate(ctx, p, false, time.Hour)
	require.ErrorIs(t, err, cause, "%v", msgs)
	assert.Less(t, time.Since(t0), testroot.Timeout, "the context ended the wait, not the hour of grace")
	joined := strings.Join(msgs, "; ")
	assert.Contains(t, joined, "SIGTERM to pid")
	assert.Contains(t, joined, "exit not confirmed after")
	assert.NotContains(t, joined, "still running after 1h0m0s")
	assert.NotContains(t, joined, "SIGKILL")
	requireState(t, owner.Alive, s.ID, "the TERM-ignoring process (no SIGKILL past the deadline)")
	s.Child.WaitReady("term") // SIGTERM was sent and received

	// An ended context sends nothing at all.
	msgs, err = Terminate(ctx, p, false, time.Hour)
	require.ErrorIs(t, err, cause)
	assert.Empty(t, msgs)
	assert.Contains(t, err.Error(), "SIGTERM not sent")
}
