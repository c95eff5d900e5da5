package owner

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// ErrIncomplete means an identity lacks a field that makes it an identity:
// a positive PID, a start time, a boot id or a host name. Such an identity
// proves nothing either way: it is never alive and never dead.
var ErrIncomplete = errors.New("owner: incomplete identity")

// Complete returns nil if every field that identifies a process is set: a
// positive PID, a non-zero start time, a non-empty boot id and host name,
// each a valid UTF-8 string without control characters. Otherwise it returns
// an error wrapping [ErrIncomplete] that names the field. (A zero UID is
// root's: it is not a missing field.)
//
// Why every field: a missing boot id would compare unequal to this boot's and
// make a live process "dead, recorded in an earlier boot"; a zero start time
// would make it "dead, PID reused". Neither may be read as a proof of death.
func (id Identity) Complete() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), ErrIncomplete)
	}
	switch {
	case id.PID <= 0:
		return bad("pid %d is not positive", id.PID)
	case id.StartTime == 0:
		return bad("start_time is missing (0)")
	case id.BootID == "":
		return bad("boot_id is missing")
	case id.Host == "":
		return bad("host is missing")
	}
	if err := CheckText(id.BootID); err != nil {
		return bad("boot_id %q: %v", id.BootID, err)
	}
	if err := CheckText(id.Host); err != nil {
		return bad("host %q: %v", id.Host, err)
	}
	return nil
}

// CheckText returns nil if s is valid UTF-8 without control characters
// (Unicode category Cc: C0, DEL and C1). Text that fails it is never
// repaired: replacing an invalid byte with U+FFFD names another file.
func CheckText(s string) error {
	ascii := true
	for i := 0; i < len(s) && ascii; i++ {
		ascii = s[i] >= 0x20 && s[i] < 0x7f
	}
	if ascii {
		return nil // the common case, without decoding runes
	}
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !validRuneAt(s, i):
			return fmt.Errorf("invalid UTF-8 at byte %d", i)
		case unicode.IsControl(r):
			return fmt.Errorf("control character %U at byte %d", r, i)
		}
	}
	return nil
}

// validRuneAt tells a real U+FFFD in s at i from a decoding error.
func validRuneAt(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size == 3
}
