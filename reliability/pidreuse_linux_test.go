package reliability

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

// testPIDReuse publishes records that name the PID of a live process (a
// helper that records every signal it gets, leading its own process group)
// with a start time, boot id or UID that does not match it: what a record
// looks like after its subject died and the PID was reused. Recovery in All
// mode (which ends even what is in use) and the CLI then replay them. No
// signal may reach a helper.
func testPIDReuse(t *testing.T, e *env) {
	const helpers = 10
	rs := e.newRun(t, "pidreuse", 0)
	type helper struct {
		p       *proc
		id      owner.Identity
		sigFile string
	}
	hs := make([]helper, helpers)
	for i := range hs {
		sf := filepath.Join(rs.dir, fmt.Sprintf("signals-%d", i))
		p := e.child(t, "sigcounter", childOpts{env: tagEnv(rs.tag, "OJ_REL_SIGFILE="+sf), pgid: true, stdin: true})
		p.waitReady(t, "ready")
		id, err := owner.Of(p.pid())
		require.NoError(t, err)
		hs[i] = helper{p, id, sf}
	}
	self, err := owner.Self()
	require.NoError(t, err)
	dead := e.deadIdentity(t)

	j, err := journal.Open(rs.root)
	require.NoError(t, err)
	defer j.Close()
	ctx := context.Background()
	n := *flagReuse
	for i := 0; i < n; i++ {
		h := hs[i%helpers].id
		subj, own := h, dead
		switch i % 6 {
		case 0: // the PID was reused: another start time
			subj.StartTime += uint64(1 + i%7)
		case 1: // recorded in an earlier boot
			subj.BootID = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		case 2: // another user's process now has the PID
			subj.UID = 65534
		case 3: // the owner's PID was reused too
			subj.StartTime--
			own = h
			own.StartTime++
		case 4: // a live owner (All mode ends what it owns)
			subj.StartTime += 1000
			own = self
		case 5: // an owner that cannot be verified, a subject from another boot
			subj.BootID = "not-this-boot"
			own = h
			own.UID = 65534
		}
		rec := &journal.Record{Kind: journal.KindProcess, Label: fmt.Sprintf("reuse %d", i), Subject: &subj, Owner: own, Phase: journal.PhaseLive}
		if i%2 == 0 {
			rec.PGID = subj.PID // the helper leads its group: a group signal would reach it
		}
		if i%5 == 0 {
			rec.Kind = journal.KindTmux // no socket: nothing to stop, the subject is checked
		}
		require.NoError(t, j.Publish(ctx, rec))
	}
	t0 := time.Now()
	rep, err := recover.Run(ctx, j, recover.Options{All: true, Grace: time.Second, Tmux: e.tmux})
	require.NoError(t, err)
	t.Logf("recover --all of %d records: %v, %d retained", n, time.Since(t0).Round(time.Millisecond), rep.Retained)
	for _, a := range rep.Actions {
		for _, d := range a.Done {
			if strings.Contains(d, "SIG") || strings.Contains(d, "exited") {
				t.Errorf("record %s (%s): recovery acted on a process: %s", a.ID, a.Reason, d)
			}
		}
	}
	// What is left (owners and subjects that cannot be verified) goes
	// through the CLI as well: it must be retained again, and signal nobody.
	cmd := exec.Command(e.cli, "recover", "--root", rs.root, "--all", "--grace", "1s")
	out, code, err := e.run(cmd)
	require.NoError(t, err)
	assert.Equal(t, 3, code, "the unverifiable records are retained:\n%s", lastLines(out, 5))

	wrong := 0
	// Positive control, after the count: a signal through a verified
	// handle does reach a helper and is recorded.
	defer func() {
		h := hs[0]
		require.NoError(t, os.Truncate(h.sigFile, 0))
		ctl := e.child(t, "sigcounter", childOpts{env: tagEnv(rs.tag, "OJ_REL_SIGFILE="+h.sigFile+".ctl"), stdin: true})
		ctl.waitReady(t, "ready")
		require.NoError(t, ctl.signal(syscall.SIGUSR1))
		waitUntil(t, []string{rs.dir}, ctl, func() bool {
			b, _ := os.ReadFile(h.sigFile + ".ctl")
			return strings.Contains(string(b), "user defined signal 1")
		}, "the control helper records SIGUSR1")
		ctl.stdin.Close()
		require.NoError(t, ctl.wait(timeout))
	}()
	for i, h := range hs {
		if b, _ := os.ReadFile(h.sigFile); len(b) > 0 {
			lines := strings.Count(string(b), "\n")
			wrong += lines
			t.Errorf("helper %d (pid %d) got %d signal(s):\n%s", i, h.id.PID, lines, b)
		}
		if h.p.exited() {
			wrong++
			t.Errorf("helper %d (pid %d) was killed", i, h.id.PID)
		} else if st, err := readStat(h.id.PID); err == nil && (st.state == 'T' || st.state == 't') {
			wrong++
			t.Errorf("helper %d (pid %d) was stopped", i, h.id.PID)
		}
		h.p.stdin.Close()
		require.NoError(t, h.p.wait(timeout))
	}
	wrong += e.checkBystanders(t, "pid reuse")
	sum.add(n, 0, wrong, 0)
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
