package owner

import (
	"bytes"
	"strconv"
)

// nsStatus is what the project reads from /proc/PID/status to judge a
// process in another PID namespace.
type nsStatus struct {
	state byte
	// nspid and nspgid list the process's PID and process group id in
	// every PID namespace from the reader's procfs down to the process's
	// own, outermost first (proc(5), "NSpid", Linux 4.1).
	nspid  []int
	nspgid []int
}

// parseNSStatus parses the State, NSpid and NSpgid lines of
// /proc/PID/status. ok is false when State or NSpid is missing or a number
// does not parse: such a process is never matched.
func parseNSStatus(b []byte) (st nsStatus, ok bool) {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		key, val, found := bytes.Cut(line, []byte(":"))
		if !found {
			continue
		}
		switch string(key) {
		case "State":
			f := bytes.Fields(val)
			if len(f) == 0 || len(f[0]) != 1 {
				return nsStatus{}, false
			}
			st.state = f[0][0]
		case "NSpid", "NSpgid":
			var ids []int
			for _, f := range bytes.Fields(val) {
				n, err := strconv.Atoi(string(f))
				if err != nil || n < 0 {
					return nsStatus{}, false
				}
				ids = append(ids, n)
			}
			if string(key) == "NSpid" {
				st.nspid = ids
			} else {
				st.nspgid = ids
			}
		}
	}
	return st, st.state != 0 && len(st.nspid) > 0
}

// zombie reports whether the state is a zombie's (or a dead task's).
func (st nsStatus) zombie() bool { return st.state == 'Z' || st.state == 'X' || st.state == 'x' }

// at returns ids[depth], or -1 when the list is shorter (the process is
// not inside the namespace at that depth).
func at(ids []int, depth int) int {
	if depth < 0 || depth >= len(ids) {
		return -1
	}
	return ids[depth]
}

// parseNSLink parses "pid:[INODE]", the target of /proc/PID/ns/pid.
func parseNSLink(b []byte) (uint64, bool) {
	s, ok := cutAffixes(string(b), "pid:[", "]")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil && n != 0
}

func cutAffixes(s, prefix, suffix string) (string, bool) {
	if len(s) < len(prefix)+len(suffix) || s[:len(prefix)] != prefix || s[len(s)-len(suffix):] != suffix {
		return "", false
	}
	return s[len(prefix) : len(s)-len(suffix)], true
}
