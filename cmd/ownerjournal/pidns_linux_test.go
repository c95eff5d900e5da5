package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/recover"
)

// helperNSWrite is `ojhelper nswrite ROOT BASE`, run as init of a new PID
// namespace: it starts a subject (`ojhelper sleep BASE.subj`), publishes it
// into ROOT from a shell that then exits (the record's owner is dead, its
// subject an orphan), writes BASE.published and blocks until stdin closes.
func helperNSWrite(args []string) int {
	if len(args) != 2 {
		os.Stderr.WriteString("usage: nswrite ROOT BASE\n")
		return 2
	}
	root, base := args[0], args[1]
	fail := func(err error) int { os.Stderr.WriteString("ojhelper nswrite: " + err.Error() + "\n"); return 1 }
	exe, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	subj := &exec.Cmd{Path: exe, Args: []string{"ojhelper", "sleep", base + ".subj"}}
	if err := subj.Start(); err != nil {
		return fail(err)
	}
	go subj.Wait()
	if _, err := awaitFile(base+".subj.id", -1); err != nil {
		return fail(err)
	}
	id, err := readID(base + ".subj.id")
	if err != nil {
		return fail(err)
	}
	// "; true" keeps the shell from exec'ing publish: the shell is the
	// owner, and it is gone once this returns.
	out, err := exec.Command("sh", "-c", `ownerjournal publish --root "$1" --pid "$2" --label in-namespace; true`, "sh", root, strconv.Itoa(id.PID)).CombinedOutput()
	if err != nil || len(out) == 0 {
		return fail(fmt.Errorf("publish: %v: %s", err, out))
	}
	if err := publishFile(base+".published", out); err != nil {
		return fail(err)
	}
	buf := make([]byte, 1)
	for {
		if _, err := os.Stdin.Read(buf); err != nil {
			return 0
		}
	}
}

// unshared is `unshare --pid --fork --mount-proc --kill-child -- args...`.
func unshared(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	wrap := testroot.Unshare(t)
	cmd := exec.Command(wrap[0], append(wrap[1:], args...)...)
	cmd.Dir = "/"
	return cmd
}

// TestRecoverPIDNamespaceChildWritesParentRecovers: a subject published
// inside a child PID namespace (its owner gone) is an orphan for a
// recoverer in the parent namespace, which ends that very process and
// removes the root; the namespace's init is untouched. Before records
// carried their namespace, the parent read the namespace's PID as one of its
// own, judged the subject dead, dropped the record and removed the root
// while the subject lived on.
func TestRecoverPIDNamespaceChildWritesParentRecovers(t *testing.T) {
	root, dir := newRoot(t), workDir(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := unshared(t, exe, "nswrite", root, filepath.Join(dir, "ns"))
	cmd.Env = append(os.Environ(), envHelper+"=1")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	init := start(t, cmd)
	defer stdin.Close()
	init.await(t, filepath.Join(dir, "ns.published"))
	subj := mustID(t, filepath.Join(dir, "ns.subj.id"))
	require.NotZero(t, subj.PIDNS)
	requireAlive(t, subj, "subject in the child namespace")

	st, stderr, code := oj(t, "status", "--root", root, "--json")
	require.Equal(t, 0, code, "%s%s", st, stderr)
	assert.Contains(t, st, `"verdict": "orphan"`)

	rep, stderr, code := recoverReport(t, "--root", root, "--grace", "5s")
	require.Equal(t, 0, code, "stderr:\n%s", stderr)
	require.Len(t, rep.Actions, 1)
	assert.Equal(t, recover.Orphan, rep.Actions[0].Verdict, rep.Actions[0].Reason)
	assert.True(t, rep.RootRemoved)
	requireDead(t, subj, "subject")
	sig, err := os.ReadFile(filepath.Join(dir, "ns.subj.sig"))
	require.NoError(t, err, "the subject must have been sent SIGTERM")
	assert.Equal(t, "SIGTERM\n", string(sig))
	assert.Nil(t, init.cmd.ProcessState, "the namespace (unshare) must still run")
	requireRootGone(t, root)
	t.Logf("recover: %s; %s", rep.Actions[0].Reason, strings.Join(rep.Actions[0].Done, "; "))
}

// TestRecoverPIDNamespaceParentWritesChildRecovers: a record written in the
// parent namespace, recovered from inside a child namespace that cannot see
// its processes, is unknown and retained (exit 3, root kept) — never dead:
// the subject lives on, and a recoverer in the parent still ends it. Before,
// the child judged the subject dead (its PID is not in the child's /proc),
// retired the record and removed the root (exit 0), leaking the process.
func TestRecoverPIDNamespaceParentWritesChildRecovers(t *testing.T) {
	root, dir := newRoot(t), workDir(t)
	subj := sleeper(t, dir, "subj")
	out, err := exec.Command("sh", "-c", `ownerjournal publish --root "$1" --pid "$2" --label on-host; true`, "sh", root, strconv.Itoa(subj.PID)).CombinedOutput()
	require.NoError(t, err, "%s", out)

	p := start(t, unshared(t, "ownerjournal", "recover", "--root", root, "--json", "--grace", "1s"))
	code := p.wait(t)
	require.Equal(t, 3, code, "stdout:\n%s\nstderr:\n%s", p.out, p.errb)
	var rep recover.Report
	require.NoError(t, oneJSON(p.out.Bytes(), &rep))
	require.Len(t, rep.Actions, 1)
	a := rep.Actions[0]
	assert.Equal(t, recover.Unknown, a.Verdict, a.Reason)
	assert.Contains(t, a.Retained, "not visible from PID namespace")
	assert.False(t, rep.RootRemoved)
	assert.DirExists(t, root)
	requireAlive(t, subj, "the parent's subject")
	assert.NoFileExists(t, filepath.Join(dir, "subj.sig"))
	t.Logf("recover in the child namespace: exit %d, retained: %s", code, a.Retained)

	// From the parent the record is an orphan again, and ends.
	rep2, stderr, code := recoverReport(t, "--root", root, "--grace", "5s")
	require.Equal(t, 0, code, "stderr:\n%s", stderr)
	assert.Equal(t, recover.Orphan, rep2.Actions[0].Verdict)
	requireDead(t, subj, "subject")
}
