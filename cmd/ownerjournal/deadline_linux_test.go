package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/recover"
)

// helperMute implements `ojhelper mute BASE SOCKET...`: a server that
// listens on each socket, accepts every connection and never answers (a
// hung tmux server, say). It writes BASE.id once listening and
// BASE.accepted at its first accepted connection, then blocks.
func helperMute(args []string) error {
	if len(args) < 2 {
		return errors.New("usage: mute BASE SOCKET...")
	}
	base := args[0]
	var mu sync.Mutex
	var held []net.Conn // never read, never written, never closed
	var once sync.Once
	for _, path := range args[1:] {
		l, err := net.Listen("unix", path)
		if err != nil {
			return err
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
				once.Do(func() { publishFile(base+".accepted", []byte("1\n")) })
			}
		}()
	}
	if err := writeSelfID(base + ".id"); err != nil {
		return err
	}
	select {}
}

// TestRecoverMuteSocketsBounded: one tmux record lists three sockets, eight
// times each, whose server accepts and never answers. Every listing used to
// cost the tmux client timeouts and the kill-server retries one after
// another (about 432 s at --grace 1s). Each distinct socket is now asked
// once, with a short timeout, in parallel: recovery ends far inside its
// deadline, reports each socket once, keeps the record and exits 3. Two
// SIGTERMs during the recovery do not cut the report short.
func TestRecoverMuteSocketsBounded(t *testing.T) {
	t.Parallel()
	root := newRoot(t)
	dir := workDir(t)
	const grace = time.Second
	deadline := recover.Options{Grace: grace}.Deadline()
	require.Equal(t, 14*time.Second, deadline, "the documented formula")

	socks := []string{"m1.sock", "m2.sock", "m3.sock"}
	mute := muteServer(t, dir, root, socks)
	var listed []string
	for i := 0; i < 8; i++ {
		listed = append(listed, socks...)
	}
	rec := &journal.Record{Kind: journal.KindTmux, Label: "mute sockets", Owner: deadOwner(t, dir), Sockets: listed, Phase: journal.PhaseIntent}
	publishRaw(t, root, rec)

	rep, code, wall := recoverSignalled(t, root, grace, mute, dir)
	t.Logf("recover --grace %v on %d listings of %d mute sockets: wall %v, elapsed %v, deadline %v",
		grace, len(listed), len(socks), wall.Round(time.Millisecond), rep.Elapsed.Round(time.Millisecond), deadline)
	assert.Equal(t, 3, code, "retained, not 143: the signals did not cut the report short")
	require.Len(t, rep.Actions, 1)
	for _, s := range socks {
		assert.Equal(t, 1, strings.Count(rep.Actions[0].Retained, filepath.Join(root, s)+" "), "each distinct socket is reported once: %s", rep.Actions[0].Retained)
	}
	assert.NotContains(t, rep.Actions[0].Retained, "deadline exceeded")
	assert.Less(t, rep.Elapsed, deadline/2, "three distinct sockets cost one client timeout, not the deadline")
	requireMuteKept(t, root, socks, rec)
}

// TestRecoverDeadline: three records list 64 distinct mute sockets each. At
// most maxClients tmux clients run at once and each waits out its timeout,
// so the work would take six rounds of it: longer than the deadline
// (Options.Deadline: 4 x grace + 10 s without --all). Recovery stops at the
// deadline, retains what is left with the reason, and exits 3; two SIGTERMs
// neither cut it short nor extend it.
func TestRecoverDeadline(t *testing.T) {
	t.Parallel()
	root := newRoot(t)
	dir := workDir(t)
	const grace = time.Second
	deadline := recover.Options{Grace: grace}.Deadline()

	var socks []string
	var recs []*journal.Record
	for r := 0; r < 3; r++ {
		var mine []string
		for i := 0; i < 64; i++ {
			mine = append(mine, fmt.Sprintf("m%d.sock", r*64+i))
		}
		socks = append(socks, mine...)
		rec := &journal.Record{Kind: journal.KindTmux, Label: "mute sockets", Owner: deadOwner(t, dir), Sockets: mine, Phase: journal.PhaseIntent}
		publishRaw(t, root, rec)
		recs = append(recs, rec)
	}
	mute := muteServer(t, dir, root, socks)

	rep, code, wall := recoverSignalled(t, root, grace, mute, dir)
	t.Logf("recover --grace %v on %d distinct mute sockets: wall %v, elapsed %v, deadline %v",
		grace, len(socks), wall.Round(time.Millisecond), rep.Elapsed.Round(time.Millisecond), deadline)
	assert.Equal(t, 3, code, "retained, not 143: the signals did not cut the report short")
	require.Len(t, rep.Actions, len(recs))
	var retained []string
	for _, a := range rep.Actions {
		retained = append(retained, a.Retained)
	}
	assert.Contains(t, strings.Join(retained, "\n"), fmt.Sprintf("deadline exceeded after %v", deadline))
	assert.Contains(t, strings.Join(rep.Problems, "\n"), "deadline exceeded")
	assert.False(t, rep.RootRemoved)
	// The bound: the deadline, plus what a step in flight at the deadline
	// may take to notice it (a one-second probe), plus process start and
	// exit.
	assert.Less(t, rep.Elapsed, deadline+grace+2*time.Second)
	assert.Less(t, wall, deadline+grace+5*time.Second)
	assert.GreaterOrEqual(t, rep.Elapsed, deadline, "the work really exceeded the deadline")
	requireMuteKept(t, root, socks, recs...)
}

// muteServer starts `ojhelper mute` on the sockets inside root and waits
// until it listens.
func muteServer(t *testing.T, dir, root string, socks []string) *proc {
	t.Helper()
	args := []string{"mute", filepath.Join(dir, "mute")}
	for _, s := range socks {
		args = append(args, filepath.Join(root, s))
	}
	mute := helper(t, args...)
	mute.await(t, filepath.Join(dir, "mute.id"))
	return mute
}

// recoverSignalled runs an orphans-only recover --json on root and sends it
// two SIGTERMs once the mute server has accepted a connection.
func recoverSignalled(t *testing.T, root string, grace time.Duration, mute *proc, dir string) (*recover.Report, int, time.Duration) {
	t.Helper()
	t0 := time.Now()
	p := start(t, ojCmd("recover", "--json", "--grace", grace.String(), "--root", root))
	mute.await(t, filepath.Join(dir, "mute.accepted"))
	require.NoError(t, unix.PidfdSendSignal(p.pidfd, syscall.SIGTERM, nil, 0))
	require.NoError(t, unix.PidfdSendSignal(p.pidfd, syscall.SIGTERM, nil, 0))
	code := p.wait(t)
	wall := time.Since(t0)
	var rep recover.Report
	require.NoError(t, oneJSON([]byte(p.out.String()), &rep), "stderr:\n%s", p.errb)
	return &rep, code, wall
}

// requireMuteKept checks that no answering socket was unlinked and no record
// retired.
func requireMuteKept(t *testing.T, root string, socks []string, recs ...*journal.Record) {
	t.Helper()
	for _, s := range socks {
		fi, err := os.Lstat(filepath.Join(root, s))
		require.NoError(t, err, "an answering socket is never unlinked")
		assert.NotZero(t, fi.Mode()&os.ModeSocket)
	}
	for _, rec := range recs {
		assert.FileExists(t, filepath.Join(root, "records", rec.ID+".json"))
	}
}
