package main

import (
	"errors"
	"flag"
	"io"
	"strings"
)

// errorDoc is the one JSON document a --json invocation prints when it ends
// in an error before printing its own document: the README promises exactly
// one JSON document on stdout on every exit path. RootRemoved is always
// false here, so a runner that only reads it never mistakes an error for a
// clean end.
type errorDoc struct {
	Command     string `json:"command"`
	Error       string `json:"error"`
	ExitCode    int    `json:"exit_code"`
	RootRemoved bool   `json:"root_removed"`
}

// countingWriter counts what was written through it.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += n
	return n, err
}

// withJSONErrors wraps a command that has --json (status, recover) so that,
// when it was asked for --json and returns an error without having printed
// anything on stdout, an errorDoc is printed. The error itself is returned
// unchanged (Main still reports it on stderr and picks the exit status).
func (c *cli) withJSONErrors(name string, args []string, fn func([]string) error) func([]string) error {
	if (name != "status" && name != "recover") || !wantsJSON(args) {
		return fn
	}
	return func(a []string) error {
		out := &countingWriter{w: c.stdout}
		c.stdout = out
		err := fn(a)
		c.stdout = out.w
		if err == nil || out.n > 0 || errors.Is(err, flag.ErrHelp) {
			return err
		}
		code := exitFail
		var ue *usageError
		var ee *exitError
		switch {
		case errors.As(err, &ue):
			code = exitUsage
		case errors.As(err, &ee):
			code = ee.code
		}
		writeJSON(c.stdout, errorDoc{Command: name, Error: err.Error(), ExitCode: code})
		return err
	}
}

// wantsJSON reports whether args (before any "--") ask for --json.
func wantsJSON(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "json" && (!hasVal || val == "true" || val == "1" || val == "t" || val == "T" || val == "TRUE" || val == "True") {
			return true
		}
	}
	return false
}
