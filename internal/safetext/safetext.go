// Package safetext makes text that came from a record, a directory entry or
// an error safe to print on a terminal or in a log.
//
// Text read from a journal is attacker-controlled: a label holding ESC[2J
// clears the reader's screen, a newline forges a line of its own (such as
// "recover (all) ...: root removed"), invalid UTF-8 garbles what follows.
// [Quote] leaves ordinary text as it is and quotes anything else the way
// Go's %q does, so a human sees every byte and no byte acts on the terminal.
// JSON output does not need it: encoding/json escapes control characters.
//
// Safe for concurrent use.
package safetext

import (
	"strconv"
	"unicode/utf8"
)

// Quote returns s unchanged when it is valid UTF-8 and every rune is
// printable by [strconv.IsPrint] (letters, marks, numbers, punctuation,
// symbols and the ASCII space) and s does not begin with a double quote;
// otherwise it returns [strconv.Quote] of s. Control characters (newline,
// tab and ESC included), format characters such as bidi overrides, other
// spaces and invalid bytes all lead to quoting. The leading-quote rule keeps
// an unquoted string from posing as a quoted one.
func Quote(s string) string {
	if Safe(s) {
		return s
	}
	return strconv.Quote(s)
}

// Safe reports whether [Quote] would return s unchanged.
func Safe(s string) bool {
	if len(s) > 0 && s[0] == '"' {
		return false
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || !strconv.IsPrint(r) {
			return false
		}
		i += size
	}
	return true
}

// Args returns a copy of a with every string, error and fmt.Stringer
// replaced by its [Quote]d text, for log lines built with a format string.
func Args(a []any) []any {
	out := make([]any, len(a))
	for i, v := range a {
		switch x := v.(type) {
		case string:
			out[i] = Quote(x)
		case error:
			out[i] = Quote(x.Error())
		case interface{ String() string }:
			out[i] = Quote(x.String())
		default:
			out[i] = v
		}
	}
	return out
}
