package owner

import (
	"bytes"
	"errors"
	"strconv"
)

// errStatFormat reports a /proc/PID/stat line that does not parse.
var errStatFormat = errors.New("owner: malformed stat line")

// statFields is what the project reads from /proc/PID/stat.
type statFields struct {
	state     byte
	ppid      int
	pgid      int
	startTime uint64
}

// parseStat parses the contents of /proc/PID/stat (proc(5)). The command
// name (field 2) is parenthesised and may itself contain spaces and ") (", so
// the fields are split after the last ')'. Fields after the name are counted
// from 3: state (3), ppid (4), pgrp (5), ..., starttime (22).
func parseStat(b []byte) (statFields, error) {
	var f statFields
	i := bytes.LastIndexByte(b, ')')
	if j := bytes.IndexByte(b, '('); i < 0 || j < 0 || j > i || i+2 > len(b) {
		return f, errStatFormat
	}
	rest := bytes.Fields(b[i+1:])
	// rest[0] is field 3; starttime, field 22, is rest[19].
	if len(rest) < 20 {
		return f, errStatFormat
	}
	if len(rest[0]) != 1 {
		return f, errStatFormat
	}
	f.state = rest[0][0]
	var err error
	if f.ppid, err = strconv.Atoi(string(rest[1])); err != nil {
		return f, errStatFormat
	}
	if f.pgid, err = strconv.Atoi(string(rest[2])); err != nil {
		return f, errStatFormat
	}
	if f.startTime, err = strconv.ParseUint(string(rest[19]), 10, 64); err != nil {
		return f, errStatFormat
	}
	return f, nil
}
