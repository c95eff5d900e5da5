// Package errs formats errors that wrap a package's sentinel without saying
// the package's name twice ("owner: pid 7: owner: process gone") and without
// trailing words that belong to another outcome.
package errs

import (
	"fmt"
	"strings"
)

// wrapped is a message that wraps a sentinel; say tells whether the
// sentinel's text is part of the message.
type wrapped struct {
	msg      string
	sentinel error
	say      bool
}

func (e *wrapped) Error() string {
	if !e.say {
		return e.msg
	}
	s := e.sentinel.Error()
	// "owner: pid 7" + "owner: process gone" reads "owner: pid 7: process gone".
	if pkg, rest, ok := strings.Cut(s, ": "); ok && strings.HasPrefix(e.msg, pkg+": ") {
		s = rest
	}
	return e.msg + ": " + s
}

func (e *wrapped) Unwrap() error { return e.sentinel }

// Wrapf returns an error that reads format's message, ": ", and the
// sentinel's text without the package prefix the message already starts
// with. It wraps sentinel for [errors.Is].
func Wrapf(sentinel error, format string, a ...any) error {
	return &wrapped{msg: fmt.Sprintf(format, a...), sentinel: sentinel, say: true}
}

// Quietf returns an error that reads format's message alone (which says the
// outcome in its own words) and wraps sentinel for [errors.Is].
func Quietf(sentinel error, format string, a ...any) error {
	return &wrapped{msg: fmt.Sprintf(format, a...), sentinel: sentinel}
}
