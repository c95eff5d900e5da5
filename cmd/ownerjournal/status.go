package main

import (
	"fmt"
	"github.com/ownerjournal/ownerjournal/internal/safetext"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

// jsonSchema is the version of the documents `status --json` and
// `recover --json` print (docs/json.md). It changes when a field changes
// meaning or goes away; new fields do not change it.
const jsonSchema = 1

// statusEntry is one record in `status --json`.
type statusEntry struct {
	ID             string          `json:"id,omitempty"`
	Path           string          `json:"path"`
	Kind           string          `json:"kind,omitempty"`
	Label          string          `json:"label,omitempty"`
	Phase          string          `json:"phase,omitempty"`
	Verdict        recover.Verdict `json:"verdict"`
	Reason         string          `json:"reason"`
	Subject        *owner.Identity `json:"subject,omitempty"`
	SubjectAlive   bool            `json:"subject_alive"`
	SubjectCommand string          `json:"subject_command,omitempty"`
	SubjectAge     *float64        `json:"subject_age_s,omitempty"`
	Owner          *owner.Identity `json:"owner,omitempty"`
	OwnerCommand   string          `json:"owner_command,omitempty"`
	PGID           int             `json:"pgid,omitempty"`
	Sockets        []string        `json:"sockets,omitempty"`
	Paths          []string        `json:"paths,omitempty"`
	Cgroup         string          `json:"cgroup,omitempty"`
	Note           string          `json:"note,omitempty"`
	Retained       bool            `json:"retained"`
}

// closingDoc says since when a root is closing and who marked it.
type closingDoc struct {
	Since   time.Time       `json:"since"`
	By      *owner.Identity `json:"by,omitempty"`
	ByState string          `json:"by_state"`
	Reopen  string          `json:"reopen,omitempty"`
}

type statusDoc struct {
	Schema   int                     `json:"schema"`
	Root     string                  `json:"root"`
	Closing  *closingDoc             `json:"closing,omitempty"`
	Records  []statusEntry           `json:"records"`
	Counts   map[recover.Verdict]int `json:"counts"`
	Temps    []string                `json:"temps,omitempty"`
	Leases   []int                   `json:"lease_pids,omitempty"`
	Extra    []string                `json:"unrecorded,omitempty"`
	Retained int                     `json:"retained"`
}

// verdictOrder is the order in which summaries name verdicts.
var verdictOrder = []recover.Verdict{recover.InUse, recover.Orphan, recover.Stale, recover.Unknown, recover.Corrupt}

func (c *cli) status(args []string) error {
	f := c.flags("status")
	rootFlag := f.String("root", "", "root directory")
	asJSON := f.Bool("json", false, "print one JSON document")
	asTree := f.Bool("tree", false, "draw the root: owners, their subjects, and what each names")
	if err := parse(f, args); err != nil {
		return err
	}
	if f.NArg() != 0 {
		return usagef("status takes no arguments")
	}
	if *asJSON && *asTree {
		return usagef("--json and --tree do not go together")
	}
	r, err := openRoot(*rootFlag)
	if err != nil {
		return err
	}
	defer r.Close()
	doc, err := statusOf(r)
	if err != nil {
		return err
	}
	switch {
	case *asJSON:
		if err := writeJSON(c.stdout, doc); err != nil {
			return err
		}
	case *asTree:
		c.printTree(doc)
	default:
		c.printStatus(doc)
	}
	if doc.Retained > 0 {
		return &exitError{exitRetained}
	}
	return nil
}

// statusOf classifies the root into a status document.
func statusOf(r *journal.Root) (*statusDoc, error) {
	st, err := recover.Classify(r)
	if err != nil {
		return nil, err
	}
	doc := &statusDoc{Schema: jsonSchema, Root: r.Path(), Records: []statusEntry{}, Counts: map[recover.Verdict]int{}}
	if ci, err := r.ClosingInfo(); err != nil {
		return nil, err
	} else if ci != nil {
		doc.Closing = &closingDoc{Since: ci.Since.UTC().Truncate(time.Second), By: ci.By, ByState: "not recorded"}
		if ci.By != nil {
			doc.Closing.ByState = owner.Check(*ci.By).State.String()
		}
		if ci.By == nil || doc.Closing.ByState == owner.Dead.String() {
			doc.Closing.Reopen = "ownerjournal reopen --root " + r.Path()
		}
	}
	commands := map[owner.Identity]string{}
	commandOf := func(id owner.Identity) string {
		if s, ok := commands[id]; ok {
			return s
		}
		s, _ := procCommand(id)
		commands[id] = s
		return s
	}
	for _, e := range st.Entries {
		se := statusEntry{Path: e.Path, Verdict: e.Verdict, Reason: e.Reason, SubjectAlive: e.SubjectAlive}
		if rec := e.Record; rec != nil {
			o := rec.Owner
			se.ID, se.Kind, se.Label, se.Phase = rec.ID, string(rec.Kind), rec.Label, string(rec.Phase)
			se.Subject, se.Owner, se.PGID, se.Sockets, se.Paths, se.Cgroup, se.Note = rec.Subject, &o, rec.PGID, rec.Sockets, rec.Paths, rec.Cgroup, rec.Note
			if rec.Subject != nil && e.SubjectAlive {
				se.SubjectCommand = commandOf(*rec.Subject)
				if age, ok := procAge(*rec.Subject); ok {
					secs := age.Round(time.Second).Seconds()
					se.SubjectAge = &secs
				}
			}
			if e.Verdict == recover.InUse {
				se.OwnerCommand = commandOf(o)
			}
		}
		if e.Verdict == recover.Unknown || e.Verdict == recover.Corrupt {
			se.Retained = true
			doc.Retained++
		}
		doc.Counts[e.Verdict]++
		doc.Records = append(doc.Records, se)
	}
	for _, t := range st.Scan.Temps {
		doc.Temps = append(doc.Temps, t.Name)
	}
	for _, l := range st.Scan.Leases {
		doc.Leases = append(doc.Leases, l.Participant.PID)
	}
	// Entries that a record names are accounted for; only the rest is
	// unrecorded.
	named := map[string]bool{}
	for _, rec := range st.Scan.Records {
		for _, p := range append(append([]string(nil), rec.Sockets...), rec.Paths...) {
			top, _, _ := strings.Cut(p, "/")
			named[top] = true
		}
	}
	for _, x := range st.Scan.Extra {
		if !named[x] {
			doc.Extra = append(doc.Extra, x)
		}
	}
	return doc, nil
}

// summary is "5 record(s): 2 in-use, 1 orphan; 1 retained": it counts
// records, one per record.
func (doc *statusDoc) summary() string {
	s := fmt.Sprintf("%d record(s)", len(doc.Records))
	var parts []string
	for _, v := range verdictOrder {
		if n := doc.Counts[v]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, v))
		}
	}
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	if doc.Retained > 0 {
		s += fmt.Sprintf("; %d retained", doc.Retained)
	}
	return s
}

// closingLine says that the root is closing, since when, by whom, and what
// to do about it.
func (doc *statusDoc) closingLine() string {
	cl := doc.Closing
	if cl == nil {
		return ""
	}
	s := "closing since " + cl.Since.Format(time.RFC3339) + " (" + ago(time.Since(cl.Since)) + " ago)"
	if cl.By != nil {
		s += fmt.Sprintf(" by recoverer pid %d (%s)", cl.By.PID, cl.ByState)
	}
	switch {
	case cl.Reopen != "":
		s += "; publish is refused until `" + cl.Reopen + "` (or `ownerjournal recover --all` to finish the teardown)"
	default:
		s += "; publish is refused while the teardown runs"
	}
	return s
}

// commandCol quotes a command line for a table cell: the program's base
// name (the JSON keeps the full path), then its arguments, truncated.
func commandCol(s string) string {
	const max = 48
	if prog, args, _ := strings.Cut(s, " "); strings.HasPrefix(prog, "/") {
		s = strings.TrimSpace(filepath.Base(prog) + " " + args)
	}
	if r := []rune(s); len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return strconv.Quote(s)
}

// ago is a duration as people say it: 42s, 3m, 5h, 2d.
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// subjectCol is a record's subject as a table shows it: PID and, for a live
// subject, its quoted command.
func (e *statusEntry) subjectCol() string {
	if e.Subject == nil {
		return "-"
	}
	s := strconv.Itoa(e.Subject.PID)
	if e.SubjectCommand != "" {
		s += " " + commandCol(e.SubjectCommand)
	}
	return s
}

func (e *statusEntry) ageCol() string {
	if e.SubjectAge == nil {
		return "-"
	}
	return ago(time.Duration(*e.SubjectAge) * time.Second)
}

func (e *statusEntry) ownerCol() string {
	if e.Owner == nil {
		return "-"
	}
	return strconv.Itoa(e.Owner.PID)
}

// name is the record's id, or its file for a corrupt record.
func (e *statusEntry) name() string {
	if e.ID != "" {
		return e.ID
	}
	return e.Path
}

func (c *cli) printStatus(doc *statusDoc) {
	fmt.Fprintf(c.stdout, "root %s: %s\n", safetext.Quote(doc.Root), doc.summary())
	if cl := doc.closingLine(); cl != "" {
		fmt.Fprintln(c.stdout, cl)
	}
	if len(doc.Records) > 0 {
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "VERDICT\tKIND\tSUBJECT\tAGE\tOWNER\tLABEL\tID\tWHY")
		for _, e := range doc.Records {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Verdict, orDash(e.Kind), e.subjectCol(), e.ageCol(), e.ownerCol(), orDash(e.Label), safetext.Quote(e.name()), safetext.Quote(e.Reason))
		}
		tw.Flush()
	}
	for _, e := range doc.Records {
		if e.Cgroup != "" {
			fmt.Fprintf(c.stdout, "%s: contained in cgroup %s\n", safetext.Quote(e.ID), safetext.Quote(e.Cgroup))
		}
		// Why there is no cgroup, or why run is ending the tree.
		if e.Note != "" {
			fmt.Fprintf(c.stdout, "%s: %s\n", safetext.Quote(e.ID), safetext.Quote(e.Note))
		}
	}
	for _, t := range doc.Temps {
		fmt.Fprintf(c.stdout, "temp file: %s\n", safetext.Quote(t))
	}
	for _, x := range doc.Extra {
		fmt.Fprintf(c.stdout, "unrecorded entry: %s\n", safetext.Quote(x))
	}
	if doc.Counts[recover.Corrupt] > 0 {
		fmt.Fprintln(c.stdout, "a corrupt record stays until a person removes it: read it, then `ownerjournal forget FILE`")
	}
}
