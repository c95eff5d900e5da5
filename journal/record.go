package journal

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ownerjournal/ownerjournal/internal/errs"
	"github.com/ownerjournal/ownerjournal/owner"
)

// SchemaVersion is the record format this package writes. It also accepts
// the versions listed in [validVersion]: version 1 records (identities
// without a PID namespace, cgroups without an id) stay readable.
const SchemaVersion = 2

// MaxRecordSize is the largest record file believed (invariant 4).
const MaxRecordSize = 64 << 10

// Kind says what a record's subject is.
type Kind string

const (
	// KindProcess: a process (and, with PGID, its process group).
	KindProcess Kind = "process"
	// KindTmux: a tmux server; its sockets are stopped with
	// `tmux -S SOCKET kill-server` before they are unlinked.
	KindTmux Kind = "tmux"
	// KindPath: no process; paths (and sockets) owned by Owner.
	KindPath Kind = "path"
)

// Phase is a record's stage in the creation protocol.
type Phase string

const (
	// PhaseIntent: published before the resource is created; the subject
	// may not exist yet, its sockets and paths may.
	PhaseIntent Phase = "intent"
	// PhaseLive: the resource exists and the subject identity is final.
	PhaseLive Phase = "live"
)

// Record is one owned subject. Sockets and Paths are relative to the root.
type Record struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	Kind    Kind   `json:"kind"`
	Label   string `json:"label,omitempty"`
	// Subject is the process that must not outlive the run; nil for
	// KindPath and for an intent whose process does not exist yet.
	Subject *owner.Identity `json:"subject,omitempty"`
	// Owner is the process responsible for the subject.
	Owner owner.Identity `json:"owner"`
	// PGID, when set, equals Subject.PID: the subject leads a process
	// group that is signalled as a whole through the leader.
	PGID    int      `json:"pgid,omitempty"`
	Sockets []string `json:"sockets,omitempty"`
	Paths   []string `json:"paths,omitempty"`
	// Cgroup is the absolute path of a cgroup v2 directory that holds the
	// subject's whole tree.
	Cgroup string `json:"cgroup,omitempty"`
	// CgroupID is that directory's cgroup id (its inode on cgroup2),
	// recorded once the group exists: recovery acts only on a group at
	// Cgroup whose id is still this one.
	CgroupID uint64 `json:"cgroup_id,omitempty"`
	// Note is free text for reports, such as why a run has no cgroup.
	Note    string    `json:"note,omitempty"`
	Phase   Phase     `json:"phase"`
	Created time.Time `json:"created"`
}

// matchID reports whether id is 1-10 digits, '-', 1-20 digits, '-', 8
// lowercase hex digits. (A regexp saying so costs a third of a millisecond
// to compile at every start of the CLI, and more per record than this.)
func matchID(id string) bool {
	pid, rest, ok1 := strings.Cut(id, "-")
	start, rnd, ok2 := strings.Cut(rest, "-")
	return ok1 && ok2 && allDigits(pid, 10) && allDigits(start, 20) && len(rnd) == 8 &&
		strings.Trim(rnd, "0123456789abcdef") == ""
}

// allDigits reports whether s is 1 to max ASCII digits.
func allDigits(s string, max int) bool {
	return len(s) >= 1 && len(s) <= max && strings.Trim(s, "0123456789") == ""
}

// ValidID reports whether id has the form NewID produces, with a writer PID
// and start time that parse (a temp file's name must name its writer).
func ValidID(id string) bool {
	if !matchID(id) {
		return false
	}
	pid, _, ok := writerOf(id)
	return ok && pid > 0
}

// NewID returns a fresh record id, "<pid>-<starttime>-<sequence>" of the
// writing process: a temp file left by a writer that died mid-publish carries
// the id and so names its writer. The sequence is a per-process counter
// (eight hex digits) that starts at a random value, so ids never repeat
// within a process (32 random bits each would collide once in about a
// hundred 10,000-record runs, and a collision replaces another record),
// while pid and start time keep processes apart. NewID is safe for
// concurrent use.
func NewID(writer owner.Identity) string {
	return fmt.Sprintf("%d-%d-%08x", writer.PID, writer.StartTime, idSeq.Add(1))
}

// idSeq is NewID's counter, seeded at random so that a process reusing a
// predecessor's pid in the same clock tick still draws other ids.
var idSeq = func() *atomic.Uint32 {
	var b [4]byte
	rand.Read(b[:])
	var v atomic.Uint32
	v.Store(binary.LittleEndian.Uint32(b[:]))
	return &v
}()

// writerOf parses the writer PID and start time out of an id.
func writerOf(id string) (pid int, start uint64, ok bool) {
	parts := strings.SplitN(id, "-", 3)
	if len(parts) != 3 {
		return 0, 0, false
	}
	p, err1 := strconv.Atoi(parts[0])
	s, err2 := strconv.ParseUint(parts[1], 10, 64)
	return p, s, err1 == nil && err2 == nil
}

// Validate checks a record's fields; it is what decoding enforces beyond
// JSON syntax.
func (rec *Record) Validate() error {
	bad := func(format string, a ...any) error { return fmt.Errorf(format, a...) }
	switch {
	case !validVersion(rec.Version):
		return bad("unknown schema version %d (want %d)", rec.Version, SchemaVersion)
	case !ValidID(rec.ID):
		return bad("invalid id %q", rec.ID)
	case rec.Phase != PhaseIntent && rec.Phase != PhaseLive:
		return bad("invalid phase %q", rec.Phase)
	case len(rec.Label) > 256:
		return bad("label longer than 256 bytes")
	case len(rec.Note) > 1024:
		return bad("note longer than 1024 bytes")
	case rec.Owner.PID <= 0:
		return bad("owner pid %d", rec.Owner.PID)
	case len(rec.Sockets) > 64 || len(rec.Paths) > 256:
		return bad("too many sockets or paths")
	}
	switch rec.Kind {
	case KindProcess, KindTmux:
		if rec.Phase == PhaseLive && rec.Subject == nil {
			return bad("live %s record without subject", rec.Kind)
		}
	case KindPath:
		if rec.Subject != nil || rec.PGID != 0 {
			return bad("path record with a subject")
		}
	default:
		return bad("invalid kind %q", rec.Kind)
	}
	if rec.Subject != nil && rec.Subject.PID <= 0 {
		return bad("subject pid %d", rec.Subject.PID)
	}
	if rec.PGID != 0 && (rec.Subject == nil || rec.PGID != rec.Subject.PID) {
		return bad("pgid %d is not the subject's pid", rec.PGID)
	}
	for _, s := range rec.Sockets {
		if err := CheckLocal(s); err != nil {
			return bad("socket %q is not inside the root", s)
		}
		if len(s) > MaxSocketName {
			return bad("socket name %q longer than %d bytes", s, MaxSocketName)
		}
		if reserved(s) {
			return bad("socket %q is the journal's own", s)
		}
	}
	for _, p := range rec.Paths {
		if err := CheckLocal(p); err != nil {
			return bad("path %q is not inside the root", p)
		}
		if reserved(p) {
			return bad("path %q is the journal's own", p)
		}
	}
	if rec.Cgroup != "" && !validCgroup(rec.Cgroup) {
		return bad("cgroup %q is not a cgroup v2 directory path", rec.Cgroup)
	}
	if err := rec.validateIdentities(); err != nil {
		return err
	}
	if err := rec.validateText(); err != nil {
		return err
	}
	return rec.validateV2()
}

// reserved reports whether p is (inside) one of the journal's own entries.
func reserved(p string) bool {
	top, _, _ := strings.Cut(p, "/")
	return top == lockName || top == closingName || top == recordsDir || top == leasesDir
}

// validCgroup accepts a clean path strictly below /sys/fs/cgroup: never the
// root cgroup itself (killing it would kill every process), never one that
// climbs out with "..".
func validCgroup(p string) bool {
	if !strings.HasPrefix(p, "/sys/fs/cgroup/") || filepath.Clean(p) != p {
		return false
	}
	return !strings.ContainsAny(p, "\x00\n")
}

// Encode returns the record's JSON form after validating it.
func (rec *Record) Encode() ([]byte, error) {
	if err := rec.Validate(); err != nil {
		return nil, errs.Quietf(ErrBadName, "journal: invalid record %s: %v", rec.ID, err)
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("journal: encode record: %w", err)
	}
	if len(b) > MaxRecordSize {
		return nil, errs.Quietf(ErrBadName, "journal: record %s is %d bytes, over the %d-byte limit", rec.ID, len(b), MaxRecordSize)
	}
	return append(b, '\n'), nil
}

// Decode parses one record strictly: a single JSON object, no unknown
// fields, at most MaxRecordSize bytes, and a record that passes Validate.
// The error text is the reason, for a [CorruptError].
func Decode(b []byte) (*Record, error) {
	if len(b) > MaxRecordSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxRecordSize)
	}
	if rec, ok := decodeFast(b); ok {
		if err := rec.Validate(); err != nil {
			return nil, err
		}
		return rec, nil
	}
	return decodeStrict(b)
}

// decodeStrict is Decode through encoding/json, for every input decodeFast
// declines.
func decodeStrict(b []byte) (*Record, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var rec Record
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("not a record: %v", err)
	}
	// Only whitespace may follow the record. (Checked on the bytes: the
	// decoder's Token would build an error value for every record.)
	if len(bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n")) != 0 {
		return nil, fmt.Errorf("trailing data after the record")
	}
	if err := checkMemberNames(b); err != nil {
		return nil, err
	}
	if err := checkStrings(b); err != nil {
		return nil, err
	}
	if err := rec.Validate(); err != nil {
		return nil, err
	}
	return &rec, nil
}

// checkMemberNames rejects what encoding/json accepts silently: member names
// that match a field only case-insensitively (with Unicode folding: "ID",
// "\u017fubject") and duplicate members, of which it keeps the last. Every
// member name of the schema is lowercase ASCII letters and underscores. b
// must hold one syntactically valid JSON value (Decode has parsed it), so a
// string followed by ':' is a member name.
func checkMemberNames(b []byte) error {
	var stack []map[string]bool // one per open object; nil for an array
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{':
			stack = append(stack, map[string]bool{})
		case '[':
			stack = append(stack, nil)
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case '"':
			j := i + 1
			for ; j < len(b) && b[j] != '"'; j++ {
				if b[j] == '\\' {
					j++
				}
			}
			if j >= len(b) {
				return fmt.Errorf("not a record: unterminated string")
			}
			str := b[i : j+1]
			i = j
			k := j + 1
			for k < len(b) && (b[k] == ' ' || b[k] == '\t' || b[k] == '\n' || b[k] == '\r') {
				k++
			}
			if k >= len(b) || b[k] != ':' || len(stack) == 0 || stack[len(stack)-1] == nil {
				continue
			}
			name := string(str[1 : len(str)-1])
			if bytes.IndexByte(str, '\\') >= 0 {
				if err := json.Unmarshal(str, &name); err != nil {
					return fmt.Errorf("not a record: %v", err)
				}
			}
			if !memberNameOK(name) {
				return fmt.Errorf("member name %q is not in the schema", name)
			}
			names := stack[len(stack)-1]
			if names[name] {
				return fmt.Errorf("duplicate member %q", name)
			}
			names[name] = true
		}
	}
	return nil
}

func memberNameOK(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}
