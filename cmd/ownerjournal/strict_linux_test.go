package main

import (
	"bytes"
	"encoding/json"
	"fmt"
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

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// plantRaw writes rec into root's journal as encoding/json renders it,
// without Validate: what a forger (or a buggy writer) leaves. edit may
// rewrite the bytes. It returns the record file's path.
func plantRaw(t *testing.T, root string, rec *journal.Record, edit func([]byte) []byte) string {
	t.Helper()
	r, err := journal.Open(root) // creates the journal's directories
	require.NoError(t, err)
	r.Close()
	rec.Version, rec.Created = journal.SchemaVersion, time.Now().UTC()
	if rec.ID == "" {
		rec.ID = journal.NewID(rec.Owner)
	}
	if rec.Phase == "" {
		rec.Phase = journal.PhaseLive
	}
	b, err := json.Marshal(rec)
	require.NoError(t, err)
	if edit != nil {
		b = edit(b)
	}
	path := filepath.Join(root, "records", rec.ID+".json")
	require.NoError(t, publishFile(path, b))
	return path
}

// TestRecoverIncompleteIdentity: records whose owner or subject identity
// lacks a field (pid, start time, boot id, host) name a live owner and a
// live subject. Each record is corrupt, reported with the field; neither
// process is signalled, the record stays and recovery exits 3, in both
// modes. Before issue 12 a missing boot id or start time made the owner
// "dead" and its live subject an orphan, which was killed.
func TestRecoverIncompleteIdentity(t *testing.T) {
	tests := []struct {
		name   string
		forge  func(o, s *owner.Identity)
		reason string
	}{
		{"owner start time 0", func(o, s *owner.Identity) { o.StartTime = 0 }, "owner identity: start_time is missing"},
		{"owner without boot id", func(o, s *owner.Identity) { o.BootID = "" }, "owner identity: boot_id is missing"},
		{"owner without host", func(o, s *owner.Identity) { o.Host = "" }, "owner identity: host is missing"},
		{"owner pid 0", func(o, s *owner.Identity) { o.PID = 0 }, "owner pid 0"},
		{"subject start time 0", func(o, s *owner.Identity) { s.StartTime = 0 }, "subject identity: start_time is missing"},
		{"subject without boot id", func(o, s *owner.Identity) { s.BootID = "" }, "subject identity: boot_id is missing"},
		{"subject without host", func(o, s *owner.Identity) { s.Host = "" }, "subject identity: host is missing"},
	}
	for _, tt := range tests {
		for _, all := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/all=%v", tt.name, all), func(t *testing.T) {
				t.Parallel()
				root := newRoot(t)
				dir := workDir(t)
				own := sleeper(t, dir, "owner")
				subj := sleeper(t, dir, "subject")
				o, s := own, subj
				tt.forge(&o, &s)
				// The id names the real owner: only the identity inside
				// lacks a field.
				rec := &journal.Record{ID: journal.NewID(own), Kind: journal.KindProcess, Label: tt.name, Subject: &s, Owner: o}
				path := plantRaw(t, root, rec, nil)

				args := []string{"--grace", "300ms", "--root", root}
				if all {
					args = append(args, "--all")
				}
				rep, _, code := recoverReport(t, args...)
				require.Equal(t, 3, code)
				require.Len(t, rep.Actions, 1)
				assert.Equal(t, "corrupt", string(rep.Actions[0].Verdict))
				assert.Contains(t, rep.Actions[0].Reason, tt.reason)
				requireAlive(t, own, "the live owner")
				requireAlive(t, subj, "the live subject")
				assert.NoFileExists(t, filepath.Join(dir, "owner.sig"), "the owner was signalled")
				assert.NoFileExists(t, filepath.Join(dir, "subject.sig"), "the subject was signalled")
				assert.FileExists(t, path, "the corrupt record is retained")
				assert.False(t, rep.RootRemoved)
			})
		}
	}
}

// TestRecoverNeverRepairsNames: a path record names "bad\xff" (raw invalid
// UTF-8) in a root that holds a file of that name and one named
// "bad\uFFFD". encoding/json would decode the name to the second file's;
// the record is corrupt instead, and both files survive.
func TestRecoverNeverRepairsNames(t *testing.T) {
	t.Parallel()
	root := newRoot(t)
	dir := workDir(t)
	rec := &journal.Record{Kind: journal.KindPath, Label: "invalid utf-8", Owner: deadOwner(t, dir), Paths: []string{"bad-x"}}
	path := plantRaw(t, root, rec, func(b []byte) []byte {
		return bytes.Replace(b, []byte(`"bad-x"`), []byte("\"bad\xff\""), 1)
	})
	for _, name := range []string{"bad\xff", "bad\uFFFD"} {
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte("keep\n"), 0o600))
	}
	rep, _, code := recoverReport(t, "--all", "--grace", "300ms", "--root", root)
	require.Equal(t, 3, code)
	require.Len(t, rep.Actions, 1)
	assert.Equal(t, "corrupt", string(rep.Actions[0].Verdict))
	assert.Contains(t, rep.Actions[0].Reason, "invalid UTF-8")
	for _, name := range []string{"bad\xff", "bad\uFFFD"} {
		assert.FileExists(t, filepath.Join(root, name), "%q must survive", name)
	}
	assert.FileExists(t, path)
}

// TestRecoverRefusesGroupOfAncestor: a runner (here a shell) is a member of
// a recorded leader's process group and runs `setsid ownerjournal recover`.
// The group holds the recoverer's parent: the group signal is refused, the
// record retained (exit 3), and the runner and the leader survive. Before
// issue 12 the runner died of the group's SIGTERM (status 143).
func TestRecoverRefusesGroupOfAncestor(t *testing.T) {
	t.Parallel()
	root := newRoot(t)
	dir := workDir(t)
	leader := sleeper(t, dir, "leader", "-pgrp")
	rec := &journal.Record{Kind: journal.KindProcess, Label: "leader", Subject: &leader, PGID: leader.PID, Owner: deadOwner(t, dir), Phase: journal.PhaseLive}
	publishRaw(t, root, rec)

	out := filepath.Join(dir, "recover.json")
	runner := exec.Command("/bin/sh", "-c", `setsid ownerjournal recover --all --json --grace 300ms --root "$1" > "$2"; echo $? > "$2.code"`, "sh", root, out)
	runner.Dir = "/"
	runner.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: leader.PID}
	p := start(t, runner)
	code := p.wait(t)
	require.Equal(t, 0, code, "the runner in the leader's group must exit normally (143: killed by the group SIGTERM); stderr:\n%s", p.errb)
	b, err := os.ReadFile(out + ".code")
	require.NoError(t, err)
	rc, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	assert.Equal(t, 3, rc, "recover exits 3: the record is retained")
	doc, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Contains(t, string(doc), "an ancestor of the caller")
	requireAlive(t, leader, "the leader")
	assert.NoFileExists(t, filepath.Join(dir, "leader.sig"), "the leader was signalled")
	assert.FileExists(t, filepath.Join(root, "records", rec.ID+".json"))
}
