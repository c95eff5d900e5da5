package main

import (
	"fmt"
	"github.com/ownerjournal/ownerjournal/internal/safetext"
	"io"
	"strconv"

	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

// treeNode is one line of `status --tree` and what hangs below it.
type treeNode struct {
	text string
	kids []*treeNode
}

func (n *treeNode) add(text string) *treeNode {
	k := &treeNode{text: text}
	n.kids = append(n.kids, k)
	return k
}

// draw prints the children of n below a line already printed, with the
// usual box-drawing prefixes.
func (n *treeNode) draw(w io.Writer, indent string) {
	for i, k := range n.kids {
		branch, next := "├─ ", "│  "
		if i == len(n.kids)-1 {
			branch, next = "└─ ", "   "
		}
		fmt.Fprintln(w, indent+branch+k.text)
		k.draw(w, indent+next)
	}
}

// printTree draws the root → owners → subjects → their sockets, paths and
// cgroups, in the listing order of status.
func (c *cli) printTree(doc *statusDoc) {
	top := &treeNode{}
	head := "root " + safetext.Quote(doc.Root) + ": " + doc.summary()
	if cl := doc.closingLine(); cl != "" {
		top.add(cl)
	}
	owners := map[owner.Identity]*treeNode{}
	var corrupt *treeNode
	for _, e := range doc.Records {
		var parent *treeNode
		switch {
		case e.Owner == nil:
			if corrupt == nil {
				corrupt = &treeNode{text: "not believed (corrupt): `ownerjournal forget FILE` after reading it"}
			}
			parent = corrupt
		default:
			if parent = owners[*e.Owner]; parent == nil {
				t := "owner pid " + strconv.Itoa(e.Owner.PID)
				if e.OwnerCommand != "" {
					t += " " + commandCol(e.OwnerCommand)
				}
				// The verdict says what became of the owner.
				switch e.Verdict {
				case recover.InUse:
					t += " (alive)"
				case recover.Orphan, recover.Stale:
					t += " (dead)"
				default:
					t += " (cannot be verified)"
				}
				parent = top.add(t)
				owners[*e.Owner] = parent
			}
		}
		parent.addRecord(e)
	}
	if corrupt != nil {
		top.kids = append(top.kids, corrupt)
	}
	for _, t := range doc.Temps {
		top.add("temp file " + safetext.Quote(t))
	}
	for _, x := range doc.Extra {
		top.add("unrecorded entry " + safetext.Quote(x))
	}
	fmt.Fprintln(c.stdout, head)
	top.draw(c.stdout, "")
}

// addRecord hangs one record (its subject line) and what it names below n.
func (n *treeNode) addRecord(e statusEntry) {
	if e.Owner == nil {
		n.add(safetext.Quote(e.Path) + ": " + safetext.Quote(e.Reason))
		return
	}
	t := string(e.Verdict) + " " + e.Kind
	if e.Subject != nil {
		t += " pid " + e.subjectCol()
		if e.SubjectAlive {
			t += ", up " + e.ageCol()
		} else {
			t += " (gone)"
		}
	}
	if e.Label != "" {
		t += " [" + safetext.Quote(e.Label) + "]"
	}
	t += "  " + safetext.Quote(e.ID)
	r := n.add(t)
	if e.Verdict != recover.InUse {
		r.add("why: " + safetext.Quote(e.Reason))
	}
	if e.PGID != 0 {
		r.add("process group " + strconv.Itoa(e.PGID))
	}
	if e.Cgroup != "" {
		r.add("cgroup " + safetext.Quote(e.Cgroup))
	}
	for _, s := range e.Sockets {
		r.add("socket " + safetext.Quote(s))
	}
	for _, p := range e.Paths {
		r.add("path " + safetext.Quote(p))
	}
}
