package journal

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/ownerjournal/ownerjournal/owner"
)

// validateIdentities and validateText are the checks of [Record.Validate]
// that make a record prove something or be corrupt: every identity it
// carries is complete ([owner.Identity.Complete]: a missing boot id or start
// time must never read as "dead"), a process group is a real group led by
// the subject (pgid 1 would make a probe kill(-1, 0)), and every string is
// valid UTF-8 without control characters (never repaired into another name).
func (rec *Record) validateIdentities() error {
	if err := rec.Owner.Complete(); err != nil {
		return fmt.Errorf("owner identity: %w", err)
	}
	if rec.Subject != nil {
		if err := rec.Subject.Complete(); err != nil {
			return fmt.Errorf("subject identity: %w", err)
		}
	}
	if rec.PGID != 0 && rec.PGID <= 1 {
		return fmt.Errorf("pgid %d is not a process group that may be signalled (must be > 1)", rec.PGID)
	}
	return nil
}

func (rec *Record) validateText() error {
	check := func(field, s string) error {
		if err := owner.CheckText(s); err != nil {
			return fmt.Errorf("%s %q: %v", field, s, err)
		}
		return nil
	}
	for _, f := range []struct{ name, s string }{
		{"kind", string(rec.Kind)}, {"phase", string(rec.Phase)}, {"label", rec.Label},
		{"note", rec.Note}, {"cgroup", rec.Cgroup},
	} {
		if err := check(f.name, f.s); err != nil {
			return err
		}
	}
	for _, s := range rec.Sockets {
		if err := check("socket", s); err != nil {
			return err
		}
	}
	for _, p := range rec.Paths {
		if err := check("path", p); err != nil {
			return err
		}
	}
	return nil
}

// checkStrings rejects what encoding/json repairs silently: a string with
// invalid UTF-8, or a \u escape of a lone surrogate, decodes to U+FFFD, so
// the record would name another file than its writer meant. b must hold one
// syntactically valid JSON value (Decode has parsed it). The error names the
// member the string belongs to.
func checkStrings(b []byte) error {
	member := ""
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		j := i + 1
		for ; j < len(b) && b[j] != '"'; j++ {
			if b[j] == '\\' {
				j++
			}
		}
		if j >= len(b) {
			return fmt.Errorf("not a record: unterminated string")
		}
		raw := b[i+1 : j]
		i = j
		k := j + 1
		for k < len(b) && (b[k] == ' ' || b[k] == '\t' || b[k] == '\n' || b[k] == '\r') {
			k++
		}
		isName := k < len(b) && b[k] == ':'
		if err := strictJSONString(raw); err != nil {
			if isName {
				return fmt.Errorf("member name %q: %v", raw, err)
			}
			return fmt.Errorf("%s: string %q: %v", member, raw, err)
		}
		if isName {
			member = string(raw)
		}
	}
	return nil
}

// strictJSONString checks the body of one JSON string literal (between the
// quotes, escapes undecoded): its bytes are valid UTF-8, and a \u escape of a
// surrogate is a high surrogate followed by a low one.
func strictJSONString(raw []byte) error {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				return fmt.Errorf("invalid UTF-8 at byte %d", i)
			}
			i += size
			continue
		}
		if i+1 < len(raw) && raw[i+1] != 'u' {
			i += 2
			continue
		}
		r, ok := hex4(raw, i)
		switch {
		case !ok:
			return fmt.Errorf("bad \\u escape at byte %d", i)
		case r >= 0xD800 && r <= 0xDBFF:
			lo, ok := hex4(raw, i+6)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Errorf("lone surrogate \\u%04x at byte %d", r, i)
			}
			i += 12
		case r >= 0xDC00 && r <= 0xDFFF:
			return fmt.Errorf("lone surrogate \\u%04x at byte %d", r, i)
		default:
			i += 6
		}
	}
	return nil
}

// hex4 parses the escape \uXXXX at raw[i:].
func hex4(raw []byte, i int) (rune, bool) {
	if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
	return rune(v), err == nil
}
