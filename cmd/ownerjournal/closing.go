package main

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/ownerjournal/ownerjournal/internal/safetext"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// closingHint turns a refusal of a closing root into a message that says
// since when, by whom, and which command reopens it.
func closingHint(r *journal.Root, err error) error {
	if !errors.Is(err, journal.ErrClosing) || r.Removed() {
		return err
	}
	ci, cerr := r.ClosingInfo()
	if cerr != nil || ci == nil {
		return err
	}
	by := "a recoverer that did not record itself"
	alive := false
	if ci.By != nil {
		st := owner.Check(*ci.By).State
		alive = st != owner.Dead
		by = fmt.Sprintf("recoverer pid %d (%s)", ci.By.PID, st)
	}
	msg := fmt.Sprintf("root %s is closing since %s, marked by %s", r.Path(), ci.Since.UTC().Format("2006-01-02T15:04:05Z"), by)
	if alive {
		return fmt.Errorf("%s: wait for its teardown to end, then create a new root", msg)
	}
	return fmt.Errorf("%s: `ownerjournal reopen --root %s` reopens it (or `ownerjournal recover --root %s --all` finishes the teardown)", msg, r.Path(), r.Path())
}

// createError is closingHint for journal.Create of the root NAME, which
// refuses an existing root that is closing.
func createError(name string, err error) error {
	if !errors.Is(err, journal.ErrClosing) {
		return err
	}
	base, berr := journal.DefaultBase()
	if berr != nil {
		return err
	}
	r, oerr := journal.Open(filepath.Join(base, name))
	if oerr != nil {
		return err
	}
	defer r.Close()
	return closingHint(r, err)
}

// reopen: ownerjournal reopen [--root DIR]
func (c *cli) reopen(args []string) error {
	f := c.flags("reopen")
	rootFlag := f.String("root", "", "root directory")
	if err := parse(f, args); err != nil {
		return err
	}
	if f.NArg() != 0 {
		return usagef("reopen takes no arguments")
	}
	r, err := openRoot(*rootFlag)
	if err != nil {
		return err
	}
	defer r.Close()
	ci, err := r.ClosingInfo()
	if err != nil {
		return err
	}
	if ci == nil {
		fmt.Fprintf(c.stdout, "root %s is not closing: nothing to reopen\n", r.Path())
		return nil
	}
	if err := r.ReopenIfAbandoned(); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "reopened %s: publish is admitted again\n", r.Path())
	return nil
}

// forget: ownerjournal forget [--root DIR] FILE
func (c *cli) forget(args []string) error {
	f := c.flags("forget")
	rootFlag := f.String("root", "", "root directory")
	name, err := oneName(f, args, "forget takes exactly one FILE (a record file name from status, e.g. 1-2-0badf00d.json)")
	if err != nil {
		return err
	}
	r, err := openRoot(*rootFlag)
	if err != nil {
		return err
	}
	defer r.Close()
	// status prints the file's full path: take that too, but only inside
	// this root's records/.
	if dir, base, ok := cutLast(name, "/"); ok {
		if dir != r.Path()+"/records" && dir != "records" {
			return usagef("%s is not in %s/records", name, r.Path())
		}
		name = base
	}
	cf, err := r.ReadCorrupt(name)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "%s: corrupt: %s\n", safetext.Quote(cf.Path), safetext.Quote(cf.Reason))
	if cf.Type.IsRegular() {
		fmt.Fprintf(c.stdout, "its text (%d bytes):\n", len(cf.Text))
		for _, l := range strings.SplitAfter(string(cf.Text), "\n") {
			if l != "" {
				fmt.Fprintln(c.stdout, "  "+printable(strings.TrimSuffix(l, "\n")))
			}
		}
	}
	if err := r.RemoveCorrupt(cf); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "removed %s\n", safetext.Quote(cf.Path))
	return nil
}

func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return "", s, false
}

// printable shows a line of a file as it is, except that bytes a terminal
// would interpret (control characters, invalid UTF-8) are escaped.
func printable(s string) string {
	var b bytes.Buffer
	for i, r := range s {
		switch {
		case r == unicode.ReplacementChar && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t' || unicode.IsPrint(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String()
}
