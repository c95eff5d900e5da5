package journal

import (
	"strconv"

	"github.com/ownerjournal/ownerjournal/owner"
)

// decodeFast decodes the plain form of a record, the one Encode writes,
// without reflection: it is most of the cost of a scan otherwise. It
// accepts only what it can decode exactly as the strict path does: the
// schema's member names each at most once, strings of printable ASCII
// without escapes, integers without fraction or exponent, no null, and
// nothing but whitespace after the record. On anything else ok is false and
// the caller decodes b the strict way, which then also explains what is
// wrong. A record it returns has not been validated.
func decodeFast(b []byte) (rec *Record, ok bool) {
	p := fastParser{b: b}
	rec = &Record{}
	if !p.object(func(name []byte) bool { return p.recordMember(rec, name) }) {
		return nil, false
	}
	p.ws()
	if p.i != len(b) {
		return nil, false
	}
	return rec, true
}

type fastParser struct {
	b []byte
	i int
}

func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// consume skips whitespace and then c.
func (p *fastParser) consume(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// object parses {"name": value, ...}, calling member for each name with
// the parser at the value; member parses the value. A name seen twice fails.
func (p *fastParser) object(member func(name []byte) bool) bool {
	if !p.consume('{') {
		return false
	}
	if p.consume('}') {
		return true
	}
	var seen [16][]byte
	n := 0
	for {
		p.ws()
		name, ok := p.raw()
		if !ok || !p.consume(':') {
			return false
		}
		for _, s := range seen[:n] {
			if string(s) == string(name) {
				return false
			}
		}
		if n == len(seen) {
			return false
		}
		seen[n] = name
		n++
		p.ws()
		if !member(name) {
			return false
		}
		if p.consume(',') {
			continue
		}
		return p.consume('}')
	}
}

// str parses a string of printable ASCII with no escapes.
func (p *fastParser) str() (string, bool) {
	b, ok := p.raw()
	return string(b), ok
}

// raw is str without the copy.
func (p *fastParser) raw() ([]byte, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	start := p.i + 1
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			p.i = j + 1
			return p.b[start:j], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// digits returns the JSON integer literal at the parser (optional minus,
// no leading zero, no fraction or exponent).
func (p *fastParser) digits(signed bool) (string, bool) {
	start := p.i
	if signed && p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	d := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	switch {
	case p.i == d, p.b[d] == '0' && p.i-d > 1:
		return "", false
	case p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E'):
		return "", false
	}
	return string(p.b[start:p.i]), true
}

func (p *fastParser) int() (int, bool) {
	s, ok := p.digits(true)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, strconv.IntSize)
	return int(v), err == nil
}

func (p *fastParser) uint64() (uint64, bool) {
	s, ok := p.digits(false)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// strings parses an array of strings; [] is an empty, non-nil slice, as
// encoding/json makes it.
func (p *fastParser) strings() ([]string, bool) {
	if !p.consume('[') {
		return nil, false
	}
	out := []string{}
	if p.consume(']') {
		return out, true
	}
	for {
		p.ws()
		s, ok := p.str()
		if !ok {
			return nil, false
		}
		out = append(out, s)
		if p.consume(',') {
			continue
		}
		return out, p.consume(']')
	}
}

func (p *fastParser) identity(id *owner.Identity) bool {
	return p.object(func(name []byte) bool {
		var ok bool
		switch string(name) {
		case "pid":
			id.PID, ok = p.int()
		case "start_time":
			id.StartTime, ok = p.uint64()
		case "boot_id":
			id.BootID, ok = p.str()
		case "uid":
			id.UID, ok = p.int()
		case "host":
			id.Host, ok = p.str()
		case "pid_ns":
			id.PIDNS, ok = p.uint64()
		}
		return ok
	})
}

func (p *fastParser) recordMember(rec *Record, name []byte) bool {
	var ok bool
	var s string
	switch string(name) {
	case "version":
		rec.Version, ok = p.int()
	case "id":
		rec.ID, ok = p.str()
	case "kind":
		s, ok = p.str()
		rec.Kind = Kind(s)
	case "label":
		rec.Label, ok = p.str()
	case "subject":
		rec.Subject = &owner.Identity{}
		ok = p.identity(rec.Subject)
	case "owner":
		ok = p.identity(&rec.Owner)
	case "pgid":
		rec.PGID, ok = p.int()
	case "sockets":
		rec.Sockets, ok = p.strings()
	case "paths":
		rec.Paths, ok = p.strings()
	case "cgroup":
		rec.Cgroup, ok = p.str()
	case "cgroup_id":
		rec.CgroupID, ok = p.uint64()
	case "note":
		rec.Note, ok = p.str()
	case "phase":
		s, ok = p.str()
		rec.Phase = Phase(s)
	case "created":
		// time.Time's own UnmarshalJSON, as encoding/json calls it.
		start := p.i
		if _, ok = p.str(); ok {
			ok = rec.Created.UnmarshalJSON(p.b[start:p.i]) == nil
		}
	}
	return ok
}
