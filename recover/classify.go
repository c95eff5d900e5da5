package recover

import (
	"fmt"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// Verdict classifies one record.
type Verdict string

const (
	InUse   Verdict = "in-use"
	Orphan  Verdict = "orphan"
	Stale   Verdict = "stale"
	Unknown Verdict = "unknown"
	Corrupt Verdict = "corrupt"
)

// Entry is one classified record (Record is nil for a corrupt one).
type Entry struct {
	Record  *journal.Record
	Path    string
	Verdict Verdict
	Reason  string
	// SubjectAlive is set when the subject was verified alive.
	SubjectAlive bool
}

// Status is a classification of a whole root; it changes nothing.
type Status struct {
	Root    string
	Entries []Entry
	Scan    *journal.Scan
}

// Classify scans root and classifies every record. It changes nothing.
func Classify(root *journal.Root) (*Status, error) {
	scan, err := root.Scan()
	if err != nil {
		return nil, err
	}
	c := newClassifier(root)
	st := &Status{Root: root.Path(), Scan: scan}
	for _, rec := range scan.Records {
		st.Entries = append(st.Entries, c.classify(rec))
	}
	for _, ce := range scan.Corrupt {
		st.Entries = append(st.Entries, Entry{Path: ce.Path, Verdict: Corrupt, Reason: ce.Reason})
	}
	SortEntries(st.Entries)
	return st, nil
}

// classifier memoizes owner verdicts: many records share one owner. It
// memoizes subject verdicts only when dead: an identity (boot, PID, start
// time) that died, or was reused, or is a zombie, never lives again, while
// a live or unverifiable subject is checked afresh for every record.
type classifier struct {
	root   *journal.Root
	owners map[owner.Identity]owner.Verdict
	dead   map[owner.Identity]owner.Verdict
}

func newClassifier(root *journal.Root) *classifier {
	return &classifier{root: root, owners: map[owner.Identity]owner.Verdict{}, dead: map[owner.Identity]owner.Verdict{}}
}

// subjectVerdict is owner.Check of a subject, memoized once dead.
func (c *classifier) subjectVerdict(id owner.Identity) owner.Verdict {
	if v, ok := c.dead[id]; ok {
		return v
	}
	v := owner.Check(id)
	if v.State == owner.Dead {
		c.dead[id] = v
	}
	return v
}

// ownerVerdict consults the owner's lease first: a held lease proves life
// even across PID namespaces, a free one proves death whatever the PID does.
func (c *classifier) ownerVerdict(id owner.Identity) owner.Verdict {
	if v, ok := c.owners[id]; ok {
		return v
	}
	var v owner.Verdict
	switch ls, err := c.root.LeaseOf(id); {
	case err != nil:
		v = owner.Verdict{State: owner.Unknown, Reason: err.Error()}
	case ls == journal.LeaseHeld:
		v = owner.Verdict{State: owner.Alive, Reason: fmt.Sprintf("pid %d holds its lease", id.PID)}
	case ls == journal.LeaseFree:
		v = owner.Verdict{State: owner.Dead, Reason: fmt.Sprintf("pid %d's lease is free", id.PID)}
	default:
		v = owner.Check(id)
	}
	c.owners[id] = v
	return v
}

func (c *classifier) classify(rec *journal.Record) Entry {
	e := Entry{Record: rec, Path: c.root.Path() + "/records/" + rec.ID + ".json"}
	ov := c.ownerVerdict(rec.Owner)
	sv := owner.Verdict{State: owner.Dead, Reason: "no subject process"}
	if rec.Subject != nil {
		sv = c.subjectVerdict(*rec.Subject)
	}
	e.SubjectAlive = sv.State == owner.Alive
	switch ov.State {
	case owner.Alive:
		e.Verdict, e.Reason = InUse, "owner alive: "+ov.Reason
	case owner.Unknown:
		e.Verdict, e.Reason = Unknown, "owner cannot be verified: "+ov.Reason
	default:
		switch sv.State {
		case owner.Alive:
			e.Verdict, e.Reason = Orphan, "owner dead ("+ov.Reason+"), subject alive ("+sv.Reason+")"
		case owner.Unknown:
			e.Verdict, e.Reason = Unknown, "owner dead ("+ov.Reason+"), subject cannot be verified: "+sv.Reason
		default:
			e.Verdict, e.Reason = Stale, "owner dead ("+ov.Reason+"), subject dead ("+sv.Reason+")"
			if unfindableIntent(rec) {
				// The owner died between its intent and the record of
				// what it started: the subject may live, and nothing
				// here can find it. An intent is not proof of nothing.
				e.Verdict, e.Reason = Unknown, "owner dead ("+ov.Reason+") before its intent record named a subject, and the record names no cgroup or socket through which recovery could end what it stood for"
			}
		}
	}
	return e
}

// unfindableIntent reports whether rec is an intent to start something that
// runs (a process or a tmux server) with no subject yet and nothing else that
// leads to it: no cgroup (which recovery kills whole) and no socket (which
// recovery stops, or keeps while something answers). Such a record is
// retained, never retired as stale.
func unfindableIntent(rec *journal.Record) bool {
	return rec.Phase == journal.PhaseIntent && rec.Subject == nil && rec.Kind != journal.KindPath &&
		rec.Cgroup == "" && len(rec.Sockets) == 0
}
