package reliability

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/cgroup"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/recover"
)

// Hostile inputs of issue 16 and issue 12 (bullets 3 and 4): identities,
// cgroups and leases that name the bait process but are not what they
// were recorded as. Believing any of them would signal the bait.

// plantValid publishes rec (valid, as the journal writes it) into the
// case's root and returns its path.
func (h *hostile) plantValid(rec *journal.Record) string {
	h.t.Helper()
	j, err := journal.Open(h.rs.root)
	require.NoError(h.t, err)
	j.Close()
	rec.Version, rec.Created = journal.SchemaVersion, time.Now().UTC()
	if rec.ID == "" {
		rec.ID = journal.NewID(h.dead)
	}
	b, err := rec.Encode()
	require.NoError(h.t, err)
	path := filepath.Join(h.rs.root, "records", rec.ID+".json")
	require.NoError(h.t, os.WriteFile(path, b, 0o600))
	return path
}

// recoverJSON runs `recover --json args...` on the case's root and decodes
// the report.
func (h *hostile) recoverJSON(args ...string) (recover.Report, int) {
	h.t.Helper()
	h.before = snapshot(h.outside)
	out, code := h.cli(nil, nil, append([]string{"recover", "--json", "--root", h.rs.root, "--grace", "1s"}, args...)...)
	var rep recover.Report
	i := strings.Index(out, "{")
	require.GreaterOrEqual(h.t, i, 0, "no report:\n%s", out)
	require.NoError(h.t, json.NewDecoder(strings.NewReader(out[i:])).Decode(&rep), "%s", out)
	return rep, code
}

// signalledNothing reports whether no action of rep sent a signal.
func (h *hostile) signalledNothing(rep recover.Report) bool {
	for _, a := range rep.Actions {
		for _, d := range a.Done {
			if strings.Contains(d, "SIG") || strings.Contains(d, "cgroup.kill") {
				h.t.Errorf("recovery signalled for %s: %s", a.ID, d)
				return false
			}
		}
	}
	return true
}

// hostileForeignNamespace: a record names the bait's PID and start time in
// a PID namespace that is not the bait's. The bait is never signalled.
func hostileForeignNamespace(h *hostile) bool {
	subj := h.baitID
	subj.PIDNS = 4026539999 // no such namespace
	h.plantValid(&journal.Record{Kind: journal.KindProcess, Label: "bait", Subject: &subj, PGID: subj.PID, Owner: h.dead, Phase: journal.PhaseLive})
	rep, code := h.recoverJSON("--all")
	if code != 0 && code != 3 {
		h.t.Errorf("exit %d", code)
		return false
	}
	for _, a := range rep.Actions {
		if a.Verdict == recover.Orphan || a.Verdict == recover.InUse {
			h.t.Errorf("the forged namespace was believed: %s %s", a.Verdict, a.Reason)
			return false
		}
	}
	return h.signalledNothing(rep)
}

// hostileCgroupReplaced: a record names a cgroup by the right name but the
// id of a group that was removed; the group now at that path holds the
// bait. It is retained with the reason (exit 3), never killed.
func hostileCgroupReplaced(h *hostile) bool {
	hier, err := cgroup.Detect()
	require.NoError(h.t, err, "the reliability suite runs as root with cgroup v2")
	var rnd [8]byte
	rand.Read(rnd[:])
	name := "oj-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(rnd[:])
	first, err := hier.Create(name)
	require.NoError(h.t, err)
	recorded, err := first.ID()
	require.NoError(h.t, err)
	require.NoError(h.t, first.Remove())
	first.Close()
	g, err := hier.Create(name)
	require.NoError(h.t, err)
	h.t.Cleanup(func() {
		// Not t.Context(): it is cancelled before clean-ups run, and a
		// cancelled Kill left the group (and the bait in it) behind.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := g.Kill(ctx); err != nil {
			h.t.Errorf("kill cgroup %s: %v", g.Path(), err)
		}
		if err := g.Remove(); err != nil {
			h.t.Errorf("remove cgroup %s: %v", g.Path(), err)
		}
		g.Close()
	})
	require.NoError(h.t, os.WriteFile(filepath.Join(g.Path(), "cgroup.procs"), []byte(strconv.Itoa(h.baitID.PID)), 0))
	path := h.plantValid(&journal.Record{Kind: journal.KindProcess, Label: "cgroup", Owner: h.dead, Cgroup: g.Path(), CgroupID: recorded, Phase: journal.PhaseIntent})
	rep, code := h.recoverJSON("--all")
	refused := code == 3 && h.signalledNothing(rep)
	for _, a := range rep.Actions {
		if a.Path == path && !strings.Contains(a.Retained, "recorded "+strconv.FormatUint(recorded, 10)) {
			h.t.Errorf("want the record retained naming the recorded id; got %+v", a)
			refused = false
		}
	}
	return refused
}

// hostileLegacyFreeLease: a free lease file named as leases were before
// they carried the boot id names the bait, which is a live record's owner.
// It is no proof of death: the record stays in use and nothing is ended.
func hostileLegacyFreeLease(h *hostile) bool {
	subj := h.baitID
	h.plantValid(&journal.Record{Kind: journal.KindProcess, Label: "bait", Subject: &subj, PGID: subj.PID, Owner: h.baitID, Phase: journal.PhaseLive})
	lease := filepath.Join(h.rs.root, "leases", strconv.Itoa(h.baitID.PID)+"-"+strconv.FormatUint(h.baitID.StartTime, 10))
	require.NoError(h.t, os.WriteFile(lease, nil, 0o600))
	rep, code := h.recoverJSON()
	refused := code == 0 && h.signalledNothing(rep)
	for _, a := range rep.Actions {
		if a.Verdict != recover.InUse {
			h.t.Errorf("a free lease without boot id was taken as proof of death: %s %s", a.Verdict, a.Reason)
			refused = false
		}
	}
	return refused
}
