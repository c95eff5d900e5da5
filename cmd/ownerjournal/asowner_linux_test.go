package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/recover"
)

// TestRecoverAsOwner: root, recovering a root that the test user owns,
// refuses it; with --as-owner it recovers with exactly that user's
// permissions. The user's own orphan is ended; a root-owned canary process
// recorded in that root cannot be signalled (EPERM) and a root-owned canary
// file cannot be removed (EACCES): both are retained (exit 3) and survive.
func TestRecoverAsOwner(t *testing.T) {
	uid, gid := testroot.SecondUser(t)
	bin := testroot.Executable(t)
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	dir := workDir(t)
	// The user's root and a directory for its helper's files.
	root := testroot.PrivateDir(t, "ojao")
	udir := testroot.PrivateDir(t, "ojau")
	for _, d := range []string{root, udir} {
		require.NoError(t, os.Chown(d, uid, gid))
	}
	t.Cleanup(func() { killLeftovers(udir) })

	canary := sleeper(t, dir, "canary")
	usubj := start(t, &exec.Cmd{Path: bin, Args: []string{"ojhelper", "sleep", filepath.Join(udir, "usubj")}, Dir: "/",
		Env: append(os.Environ(), envHelper+"=1"), SysProcAttr: &syscall.SysProcAttr{Credential: cred}})
	usubj.await(t, filepath.Join(udir, "usubj.id"))
	usubjID := mustID(t, filepath.Join(udir, "usubj.id"))
	require.Equal(t, uid, usubjID.UID)
	// A root-owned file in a root-owned directory inside the user's root.
	canaryDir := filepath.Join(root, "canarydir")
	require.NoError(t, os.Mkdir(canaryDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(canaryDir, "canary"), []byte("root's"), 0o644))

	// The binary dispatches on its name: run it as "ownerjournal".
	link := filepath.Join(testroot.PrivateDir(t, "ojal"), "ownerjournal")
	require.NoError(t, os.Chmod(filepath.Dir(link), 0o755))
	require.NoError(t, os.Symlink(bin, link))

	// The user publishes both, from a shell that then exits: orphans.
	pub := exec.Command("sh", "-c", `"$1" publish --root "$2" --pid "$3" --label canary && "$1" publish --root "$2" --pid "$4" --path canarydir --label mine; true`,
		"sh", link, root, strconv.Itoa(canary.PID), strconv.Itoa(usubjID.PID))
	pub.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
	pub.Dir = "/"
	pub.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := pub.CombinedOutput()
	require.NoError(t, err, "%s", out)
	recs, err := readRecords(root)
	require.NoError(t, err)
	require.Len(t, recs, 2, "publish output: %s", out)

	// Root refuses a root it does not own, as before.
	p := start(t, &exec.Cmd{Path: link, Args: []string{"ownerjournal", "recover", "--root", root}, Dir: "/"})
	require.Equal(t, 1, p.wait(t))
	assert.Contains(t, p.errb.String(), fmt.Sprintf("owned by uid %d", uid))

	p = start(t, &exec.Cmd{Path: link, Args: []string{"ownerjournal", "recover", "--as-owner", "--json", "--grace", "1s", "--root", root}, Dir: "/"})
	code := p.wait(t)
	require.Equal(t, 3, code, "stdout:\n%s\nstderr:\n%s", p.out, p.errb)
	assert.Contains(t, p.errb.String(), fmt.Sprintf("running as the root's owner (%d:%d:", uid, gid))
	assert.Contains(t, p.errb.String(), "no capabilities")
	var rep recover.Report
	require.NoError(t, oneJSON(p.out.Bytes(), &rep))
	byLabel := map[string]recover.Action{}
	for _, a := range rep.Actions {
		byLabel[a.Label] = a
	}
	require.Len(t, byLabel, 2, "%+v", rep.Actions)
	assert.Equal(t, recover.Orphan, byLabel["canary"].Verdict)
	assert.Contains(t, byLabel["canary"].Retained, "operation not permitted", "the user cannot signal root's process")
	assert.Equal(t, recover.Orphan, byLabel["mine"].Verdict)
	assert.Contains(t, byLabel["mine"].Retained, "permission denied", "the user cannot remove root's file")
	assert.False(t, rep.RootRemoved)

	requireAlive(t, canary, "root-owned canary process")
	assert.NoFileExists(t, filepath.Join(dir, "canary.sig"), "the canary was signalled")
	assert.FileExists(t, filepath.Join(canaryDir, "canary"))
	requireDead(t, usubjID, "the user's own orphan")
	t.Logf("recover --as-owner: exit %d; canary: %s; mine: %s", code, byLabel["canary"].Retained, byLabel["mine"].Retained)
}

// TestRecoverAsOwnerNothingToDrop: on the caller's own root --as-owner
// changes nothing; a caller that is not root cannot use it to recover
// another user's root.
func TestRecoverAsOwnerNothingToDrop(t *testing.T) {
	uid, gid := testroot.SecondUser(t)
	bin := testroot.Executable(t)
	root := newRoot(t)
	p := start(t, &exec.Cmd{Path: bin, Args: []string{"ownerjournal", "recover", "--as-owner", "--root", root}, Dir: "/"})
	require.Equal(t, 0, p.wait(t), "stdout:\n%s\nstderr:\n%s", p.out, p.errb)
	assert.NotContains(t, p.errb.String(), "running as the root's owner")
	requireRootGone(t, root)

	mine := testroot.PrivateDir(t, "ojam")
	p = start(t, &exec.Cmd{Path: bin, Args: []string{"ownerjournal", "recover", "--as-owner", "--root", mine}, Dir: "/",
		SysProcAttr: &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}})
	require.Equal(t, 1, p.wait(t), "stdout:\n%s\nstderr:\n%s", p.out, p.errb)
	assert.Contains(t, p.errb.String(), "only root can recover as another user")
	assert.DirExists(t, mine)
}
