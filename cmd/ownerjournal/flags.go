package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ownerjournal/ownerjournal/owner"
)

// Go's flag package reports parse errors in its own words, single-dash, and
// prints its defaults after them; flagMessage turns them into one line that
// names the flag as people type it (--grace), the value and what is
// expected.
var (
	flagInvalidRE  = regexp.MustCompile(`^invalid (?:boolean )?value (".*") for flag -([^:]+): `)
	flagUndefRE    = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	flagNeedsArgRE = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
)

// flagMessage is the one-line usage error for a flag parse error of the
// subcommand cmd.
func flagMessage(f *flag.FlagSet, cmd string, err error) string {
	msg := err.Error()
	if m := flagInvalidRE.FindStringSubmatch(msg); m != nil {
		val, uerr := strconv.Unquote(m[1])
		if uerr != nil {
			val = m[1]
		}
		name := m[2]
		return fmt.Sprintf("--%s: %q is not %s", name, val, expected(f.Lookup(name)))
	}
	if m := flagUndefRE.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("unknown flag --%s (ownerjournal help %s lists the flags)", m[1], cmd)
	}
	if m := flagNeedsArgRE.FindStringSubmatch(msg); m != nil {
		fl := f.Lookup(m[1])
		return fmt.Sprintf("--%s needs a value: %s", m[1], expected(fl))
	}
	return msg
}

// expected says, in words, what a flag's value must be.
func expected(fl *flag.Flag) string {
	if fl == nil {
		return "a valid value"
	}
	g, ok := fl.Value.(flag.Getter)
	if !ok {
		return "a valid value"
	}
	switch g.Get().(type) {
	case time.Duration:
		return "a duration (e.g. 500ms, 5s)"
	case int, int64, uint, uint64:
		return "a whole number"
	case bool:
		return "true or false"
	}
	return "a valid value"
}

// placeholders are the words the synopses use for flag values.
var placeholders = map[string]string{
	"root": "DIR", "pid": "PID", "owner-pid": "PID", "label": "L", "kind": "KIND",
	"socket": "S", "path": "P", "cgroup": "MODE", "name": "N",
}

// placeholder is the word shown after a flag in help: the back-quoted word
// of its usage, else one derived from its type; "" for a boolean.
func placeholder(fl *flag.Flag) (string, string) {
	name, usage := flag.UnquoteUsage(fl)
	if ph, ok := placeholders[fl.Name]; ok && name != "" {
		return ph, usage
	}
	switch name {
	case "":
		return "", usage
	case "duration":
		return "D", usage
	case "int", "uint":
		return "N", usage
	case "value", "string":
		return strings.ToUpper(fl.Name[:1]), usage
	}
	return name, usage
}

// flagOutput is a FlagSet's output. The flag package writes a parse error
// there just before it calls Usage, and writes nothing before the Usage of
// -h: so Usage prints the help only when no error came first (the error is
// reported by parse, in one line).
type flagOutput struct{ failed bool }

func (o *flagOutput) Write(p []byte) (int, error) { o.failed = true; return len(p), nil }

func (o *flagOutput) usage(w io.Writer, name string, f *flag.FlagSet) {
	if !o.failed {
		printHelp(w, name, f)
	}
	o.failed = false
}

// processError says that the process a flag named cannot be used, without
// repeating the pid the owner package's error already names.
func processError(role string, pid int, err error) error {
	if errors.Is(err, owner.ErrGone) {
		return fmt.Errorf("the %s, pid %d, is not running", role, pid)
	}
	return fmt.Errorf("the %s: %w", role, err)
}
