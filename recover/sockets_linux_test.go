package recover

import (
	"bufio"
	"context"
	"net"
	"os"
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
)

// TestSocketHardLinkRefused: issue 11, bullet 3. A recorded tmux socket
// that is a hard link (nlink 2) to a bystander's tmux server outside the
// root is refused with its path and the reason and never connected to:
// the bystander lives on and still answers.
func TestSocketHardLinkRefused(t *testing.T) {
	t.Parallel()
	r, dir := openRoot(t)
	outside := testroot.Dir(t)
	mine := filepath.Join(outside, "mine.sock")
	mineID := startTmux(t, mine)
	require.NoError(t, os.Link(mine, filepath.Join(dir, "s")))
	dead := deadIdentity(t)
	rec := publish(t, r, &journal.Record{Kind: journal.KindTmux, Label: "tmux", Subject: &dead, Owner: dead, Sockets: []string{"s"}})
	rep, err := Run(context.Background(), r, Options{Grace: time.Second})
	require.NoError(t, err)
	a := actionFor(t, rep, rec.ID)
	require.Contains(t, a.Retained, filepath.Join(dir, "s")+": has 2 links")
	require.False(t, rep.Clean())
	requireState(t, owner.Alive, mineID, "bystander tmux server")
	require.NoError(t, tmuxCmd(mine, "has-session").Run(), "the bystander must still answer")
}

// TestSocketHardLinkNeverConnected: a hard-linked socket (a plain server
// outside the root) named by a process record is never connected to: the
// first connection the server ever accepts is the test's own.
func TestSocketHardLinkNeverConnected(t *testing.T) {
	t.Parallel()
	r, dir := openRoot(t)
	outside := filepath.Join(testroot.Dir(t), "srv.sock")
	l, err := net.Listen("unix", outside)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	require.NoError(t, os.Link(outside, filepath.Join(dir, "app.sock")))
	rec := publish(t, r, &journal.Record{Kind: journal.KindPath, Owner: deadIdentity(t), Sockets: []string{"app.sock"}})
	rep, err := Run(context.Background(), r, Options{Grace: time.Second})
	require.NoError(t, err)
	require.Contains(t, actionFor(t, rep, rec.ID).Retained, "has 2 links")
	requireFirstAccept(t, l, outside)
	_, err = os.Lstat(filepath.Join(dir, "app.sock"))
	require.NoError(t, err, "the link is left in place")
}

// childDirSwapper runs as the second user with a recorded scratch
// directory it owns as fd 3, and swaps scratch/d (holding the recorded
// socket) with scratch/alt (a symlink to a directory outside the root that
// holds a bystander's tmux socket of the same name) until it is killed.
func childDirSwapper() int {
	for round := 0; ; round++ {
		unix.Renameat2(3, "d", 3, "alt", unix.RENAME_EXCHANGE)
		if round == 0 {
			if err := testroot.Ready("swapping", nil); err != nil {
				return fail(err)
			}
		}
	}
}

// dirSwapTries: the name-based tmux client reached the bystander in about
// 6 tries of 20.
const dirSwapTries = 20

// TestSocketDirSwapRace: issue 11, bullet 3. A worker of another UID owns
// scratch/ and swaps scratch/d (holding the recorded tmux socket) with a
// symlink to an outside directory where a bystander tmux server listens on
// a socket of the same name. Recovery pins the socket once and runs its
// clients on that descriptor: the bystander survives every try.
func TestSocketDirSwapRace(t *testing.T) {
	uid, gid := testroot.SecondUser(t)
	outside := testroot.Dir(t)
	require.NoError(t, os.Chmod(outside, 0o755))
	mine := filepath.Join(outside, "s")
	mineID := startTmux(t, mine)
	touched := 0
	for try := 0; try < dirSwapTries; try++ {
		r, dir := openRoot(t)
		scratch := filepath.Join(dir, "scratch")
		require.NoError(t, os.MkdirAll(filepath.Join(scratch, "d"), 0o700))
		srv := startTmux(t, filepath.Join(scratch, "d", "s"))
		require.NoError(t, os.Symlink(outside, filepath.Join(scratch, "alt")))
		for _, p := range []string{scratch, filepath.Join(scratch, "d"), filepath.Join(scratch, "alt")} {
			require.NoError(t, os.Lchown(p, uid, gid))
		}
		publish(t, r, &journal.Record{Kind: journal.KindTmux, Label: "tmux", Subject: &srv, Owner: deadIdentity(t), Sockets: []string{"scratch/d/s"}})
		sd, err := os.Open(scratch)
		require.NoError(t, err)
		c := testroot.StartOpts(t, "dirswap", testroot.Options{
			Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
			ExtraFiles: []*os.File{sd},
		})
		sd.Close()
		c.WaitReady("swapping")
		_, err = Run(context.Background(), r, Options{Grace: time.Second})
		c.Kill()
		require.NoError(t, err)
		if owner.Check(mineID).State != owner.Alive || tmuxCmd(mine, "has-session").Run() != nil {
			touched++
			break
		}
	}
	t.Logf("%d tries: the bystander tmux server was reached in %d", dirSwapTries, touched)
	require.Zero(t, touched, "a swapped directory redirected the tmux client to a server outside the root")
}

// TestHostileSocketsBounded: issue 12, bullet 5 (the socket side). Three
// sockets that accept connections and never answer, each named by 8 tmux
// records: each distinct socket costs about one short client timeout, the
// sockets are handled in parallel, and they are reported retained.
func TestHostileSocketsBounded(t *testing.T) {
	t.Parallel()
	r, dir := openRoot(t)
	var socks []string
	for i := 0; i < 3; i++ {
		name := "m" + strconv.Itoa(i) + ".sock"
		l, err := net.Listen("unix", filepath.Join(dir, name))
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
		socks = append(socks, name)
	}
	dead := deadIdentity(t)
	var ids []string
	for i := 0; i < 8; i++ {
		ids = append(ids, publish(t, r, &journal.Record{Kind: journal.KindTmux, Label: "mute", Subject: &dead, Owner: dead, Sockets: socks}).ID)
	}
	t0 := time.Now()
	rep, err := Run(context.Background(), r, Options{Grace: time.Second})
	took := time.Since(t0)
	require.NoError(t, err)
	t.Logf("3 mute sockets x 8 records: recovery took %v", took)
	require.False(t, rep.Clean())
	require.False(t, rep.RootRemoved)
	for _, id := range ids {
		a := actionFor(t, rep, id)
		for _, s := range socks {
			assert.Contains(t, a.Retained, filepath.Join(dir, s)+" accepts connections but does not answer within")
		}
		assert.NotContains(t, a.Retained, "signal: killed")
	}
	require.Less(t, took, 20*time.Second, "recovery must be bounded (one short timeout per distinct socket, in parallel)")
}

// TestStoppedTmuxServer: issue 17, bullet 5. A recorded tmux server that
// is stopped (SIGSTOP, state T) would never answer a client: it is ended
// through its verified handle within one grace period, and the report
// says what happened (never "signal: killed").
func TestStoppedTmuxServer(t *testing.T) {
	t.Parallel()
	r, dir := openRoot(t)
	srv := startTmux(t, filepath.Join(dir, "s"))
	p, err := owner.Open(srv)
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.Signal(syscall.SIGSTOP))
	require.Eventually(t, func() bool { return stopped(srv.PID) }, testroot.Timeout, 10*time.Millisecond)
	rec := publish(t, r, &journal.Record{Kind: journal.KindTmux, Label: "tmux", Subject: &srv, Owner: deadIdentity(t), Sockets: []string{"s"}})
	t0 := time.Now()
	rep, err := Run(context.Background(), r, Options{Grace: time.Second})
	took := time.Since(t0)
	require.NoError(t, err)
	t.Logf("stopped tmux server: recovery took %v", took)
	a := actionFor(t, rep, rec.ID)
	require.Empty(t, a.Retained)
	done := strings.Join(a.Done, "; ")
	require.Contains(t, done, "was stopped (state T), not asked")
	require.NotContains(t, done, "signal: killed")
	requireState(t, owner.Dead, srv, "stopped tmux server")
	require.True(t, rep.RootRemoved, rep.RootKept)
}

// TestSocketBindMountRefused: a recorded socket that is a bind mount of a
// socket outside the root (a mount point, so nlink is 1) is refused and
// never connected to.
func TestSocketBindMountRefused(t *testing.T) {
	t.Parallel()
	r, dir := openRoot(t)
	outside := filepath.Join(testroot.Dir(t), "srv.sock")
	l, err := net.Listen("unix", outside)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	sock := filepath.Join(dir, "app.sock")
	require.NoError(t, os.WriteFile(sock, nil, 0o600))
	require.NoError(t, unix.Mount(outside, sock, "", unix.MS_BIND, ""))
	t.Cleanup(func() { unix.Unmount(sock, unix.MNT_DETACH) })
	rec := publish(t, r, &journal.Record{Kind: journal.KindPath, Owner: deadIdentity(t), Sockets: []string{"app.sock"}})
	rep, err := Run(context.Background(), r, Options{Grace: time.Second})
	require.NoError(t, err)
	require.Contains(t, actionFor(t, rep, rec.ID).Retained, sock+": is on another mount")
	requireFirstAccept(t, l, outside)
}

// requireFirstAccept checks that the first connection l ever accepts is
// the test's own: nothing connected to it before.
func requireFirstAccept(t *testing.T, l net.Listener, path string) {
	t.Helper()
	c, err := net.Dial("unix", path)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("me\n"))
	require.NoError(t, err)
	got, err := l.Accept()
	require.NoError(t, err)
	defer got.Close()
	line, err := bufio.NewReader(got).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "me\n", line, "recovery connected to the socket")
}
