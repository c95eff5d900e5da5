package journal

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/owner"
)

var (
	testOwner   = owner.Identity{PID: 4242, StartTime: 987654, BootID: "0d8c7a3e-5f0e-4a57-9d3c-1c1a8f6b2f10", UID: 1000, Host: "build-1", PIDNS: 4026531836}
	testSubject = owner.Identity{PID: 4343, StartTime: 987700, BootID: "0d8c7a3e-5f0e-4a57-9d3c-1c1a8f6b2f10", UID: 1000, Host: "build-1", PIDNS: 4026532178}
)

// sampleRecord is a valid record with every field set.
func sampleRecord() *Record {
	subj := testSubject
	return &Record{
		Version:  SchemaVersion,
		ID:       "4242-987654-0a1b2c3d",
		Kind:     KindTmux,
		Label:    "e2e tmux",
		Subject:  &subj,
		Owner:    testOwner,
		PGID:     subj.PID,
		Sockets:  []string{"tmux-1", "socks/s2"},
		Paths:    []string{"scratch", "work/dir"},
		Cgroup:   "/sys/fs/cgroup/ownerjournal/run-1",
		CgroupID: 7321,
		Phase:    PhaseLive,
		Created:  time.Date(2026, 5, 1, 12, 30, 0, 123e6, time.UTC),
	}
}

// sampleJSON encodes sampleRecord as a generic map, edits it, and returns the
// JSON text.
func sampleJSON(t *testing.T, edit func(m map[string]any)) []byte {
	t.Helper()
	b, err := sampleRecord().Encode()
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	if edit != nil {
		edit(m)
	}
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return out
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, rec := range []*Record{
		sampleRecord(),
		{Version: 2, ID: "1-0-00000000", Kind: KindProcess, Owner: testOwner, Phase: PhaseIntent},
		{Version: 1, ID: "7-8-ffffffff", Kind: KindPath, Owner: owner.Identity{PID: 7, StartTime: 8, BootID: "b", Host: "h"}, Paths: []string{"a"}, Phase: PhaseLive},
	} {
		b, err := rec.Encode()
		require.NoError(t, err)
		got, err := Decode(b)
		require.NoError(t, err)
		assert.Equal(t, rec, got)
	}
}

func TestEncodeRefusesInvalid(t *testing.T) {
	tests := []struct {
		name string
		edit func(r *Record)
	}{
		{"bad id", func(r *Record) { r.ID = "../../etc/passwd" }},
		{"bad kind", func(r *Record) { r.Kind = "vm" }},
		{"escaping path", func(r *Record) { r.Paths = []string{"../x"} }},
		{"root itself", func(r *Record) { r.Paths = []string{"."} }},
		{"reserved socket", func(r *Record) { r.Sockets = []string{"lock"} }},
		{"too large", func(r *Record) {
			r.Paths = nil
			for i := 0; i < 256; i++ {
				r.Paths = append(r.Paths, strings.Repeat("p", 300))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := sampleRecord()
			tt.edit(rec)
			b, err := rec.Encode()
			require.ErrorIs(t, err, ErrBadName)
			assert.Nil(t, b)
		})
	}
}

func TestDecode(t *testing.T) {
	valid := sampleJSON(t, nil)
	set := func(k string, v any) func(m map[string]any) { return func(m map[string]any) { m[k] = v } }
	del := func(k string) func(m map[string]any) { return func(m map[string]any) { delete(m, k) } }
	setIn := func(obj, k string, v any) func(m map[string]any) {
		return func(m map[string]any) { m[obj].(map[string]any)[k] = v }
	}
	delIn := func(obj, k string) func(m map[string]any) {
		return func(m map[string]any) { delete(m[obj].(map[string]any), k) }
	}
	many := func(n int, s string) []string {
		var out []string
		for i := 0; i < n; i++ {
			out = append(out, s+strings.Repeat("x", i%20)+string(rune('a'+i%26)))
		}
		return out
	}
	tests := []struct {
		name   string
		in     []byte
		reason string // empty: valid
	}{
		{name: "valid", in: valid},
		{name: "valid indented with trailing newline", in: func() []byte { b, _ := sampleRecord().Encode(); return b }()},
		{name: "valid with trailing whitespace", in: append(append([]byte{}, valid...), " \n\t\n"...)},
		{name: "minimal intent", in: []byte(`{"version":1,"id":"1-2-abcdef01","kind":"process","owner":{"pid":1,"start_time":2,"boot_id":"b","uid":0,"host":"h"},"phase":"intent","created":"2026-01-01T00:00:00Z"}`)},
		{name: "cgroup below the root", in: sampleJSON(t, set("cgroup", "/sys/fs/cgroup/a/b"))},

		// Not JSON, not an object.
		{name: "empty", in: nil, reason: "not a record"},
		{name: "not JSON", in: []byte("pid=1"), reason: "not a record"},
		{name: "truncated", in: valid[:len(valid)/2], reason: "not a record"},
		{name: "null", in: []byte("null"), reason: "unknown schema version 0"},
		{name: "array", in: []byte("[]"), reason: "not a record"},
		{name: "number", in: []byte("42"), reason: "not a record"},
		{name: "larger than the limit", in: append(append([]byte{}, valid...), bytes.Repeat([]byte(" "), MaxRecordSize)...), reason: "larger than"},

		// Strictness.
		{name: "unknown field", in: sampleJSON(t, set("extra", 1)), reason: "unknown field"},
		{name: "unknown nested field", in: sampleJSON(t, setIn("owner", "gid", 0)), reason: "unknown field"},
		{name: "trailing object", in: append(append([]byte{}, valid...), "{}"...), reason: "trailing data"},
		{name: "two records", in: append(append([]byte{}, valid...), valid...), reason: "trailing data"},
		{name: "trailing garbage", in: append(append([]byte{}, valid...), "x"...), reason: "trailing data"},
		{name: "member name in another case", in: bytes.Replace(valid, []byte(`"version"`), []byte(`"Version"`), 1), reason: "not in the schema"},
		{name: "member name by Unicode folding", in: bytes.Replace(valid, []byte(`"sockets"`), []byte("\"\u017fockets\""), 1), reason: "not in the schema"},
		{name: "nested member name in another case", in: bytes.Replace(valid, []byte(`"pid"`), []byte(`"PID"`), 1), reason: "not in the schema"},
		{name: "duplicate member", in: bytes.Replace(valid, []byte(`{`), []byte(`{"label":"first",`), 1), reason: "duplicate member"},
		{name: "duplicate member by escape", in: bytes.Replace(valid, []byte(`{`), []byte(`{"\u0076ersion":1,`), 1), reason: "duplicate member"},
		{name: "escaped member name in another case", in: bytes.Replace(valid, []byte(`"version"`), []byte(`"\u0056ersion"`), 1), reason: "not in the schema"},
		{name: "escaped member name", in: bytes.Replace(valid, []byte(`"version"`), []byte(`"\u0076ersion"`), 1)},
		{name: "label holding JSON", in: sampleJSON(t, set("label", `{"Version":2,"id":"x"}: "`))},
		{name: "duplicate nested member", in: bytes.Replace(valid, []byte(`"pid":`), []byte(`"pid":1,"pid":`), 1), reason: "duplicate member"},
		{name: "string pid", in: sampleJSON(t, setIn("owner", "pid", "1")), reason: "not a record"},
		{name: "negative start time", in: sampleJSON(t, setIn("owner", "start_time", -1)), reason: "not a record"},
		{name: "fractional pid", in: sampleJSON(t, setIn("owner", "pid", 1.5)), reason: "not a record"},

		// Version.
		{name: "version 0", in: sampleJSON(t, set("version", 0)), reason: "unknown schema version"},
		{name: "version 3", in: sampleJSON(t, set("version", 3)), reason: "unknown schema version"},
		{name: "version 1 without the version 2 fields", in: sampleJSON(t, func(m map[string]any) {
			m["version"] = 1
			delete(m["owner"].(map[string]any), "pid_ns")
			delete(m["subject"].(map[string]any), "pid_ns")
			delete(m, "cgroup_id")
		})},
		{name: "version 1 with an owner pid_ns", in: sampleJSON(t, func(m map[string]any) {
			m["version"] = 1
			delete(m, "cgroup_id")
			delete(m["subject"].(map[string]any), "pid_ns")
		}), reason: "owner pid_ns in a version 1 record"},
		{name: "version 1 with a subject pid_ns", in: sampleJSON(t, func(m map[string]any) {
			m["version"] = 1
			delete(m, "cgroup_id")
			delete(m["owner"].(map[string]any), "pid_ns")
		}), reason: "subject pid_ns in a version 1 record"},
		{name: "version 1 with a cgroup_id", in: sampleJSON(t, func(m map[string]any) {
			m["version"] = 1
			delete(m["owner"].(map[string]any), "pid_ns")
			delete(m["subject"].(map[string]any), "pid_ns")
		}), reason: "cgroup_id in a version 1 record"},
		{name: "cgroup_id without a cgroup", in: sampleJSON(t, del("cgroup")), reason: "without a cgroup"},
		{name: "version 2 without pid_ns (darwin)", in: sampleJSON(t, func(m map[string]any) {
			delete(m["owner"].(map[string]any), "pid_ns")
			delete(m["subject"].(map[string]any), "pid_ns")
		})},
		{name: "negative pid_ns", in: sampleJSON(t, setIn("owner", "pid_ns", -1)), reason: "not a record"},
		{name: "no version", in: sampleJSON(t, del("version")), reason: "unknown schema version"},

		// Ids.
		{name: "empty id", in: sampleJSON(t, set("id", "")), reason: "invalid id"},
		{name: "id with path", in: sampleJSON(t, set("id", "../1-2-abcdef01")), reason: "invalid id"},
		{name: "id with suffix", in: sampleJSON(t, set("id", "1-2-abcdef01.json")), reason: "invalid id"},
		{name: "id upper hex", in: sampleJSON(t, set("id", "1-2-ABCDEF01")), reason: "invalid id"},
		{name: "id short random", in: sampleJSON(t, set("id", "1-2-abc")), reason: "invalid id"},
		{name: "id pid 0", in: sampleJSON(t, set("id", "0-2-abcdef01")), reason: "invalid id"},
		{name: "id start overflows", in: sampleJSON(t, set("id", "1-99999999999999999999-abcdef01")), reason: "invalid id"},
		{name: "id with newline", in: sampleJSON(t, set("id", "1-2-abcdef01\n")), reason: "invalid id"},

		// Fields.
		{name: "bad kind", in: sampleJSON(t, set("kind", "daemon")), reason: "invalid kind"},
		{name: "bad phase", in: sampleJSON(t, set("phase", "dead")), reason: "invalid phase"},
		{name: "owner pid 0", in: sampleJSON(t, setIn("owner", "pid", 0)), reason: "owner pid"},
		{name: "subject pid 0", in: sampleJSON(t, setIn("subject", "pid", 0)), reason: "subject pid"},
		{name: "live without subject", in: sampleJSON(t, func(m map[string]any) { delete(m, "subject"); delete(m, "pgid") }), reason: "without subject"},
		{name: "path record with subject", in: sampleJSON(t, set("kind", "path")), reason: "path record with a subject"},
		{name: "pgid not the subject", in: sampleJSON(t, set("pgid", 1)), reason: "pgid"},
		{name: "label too long", in: sampleJSON(t, set("label", strings.Repeat("l", 257))), reason: "label"},
		{name: "too many sockets", in: sampleJSON(t, set("sockets", many(65, "s"))), reason: "too many"},
		{name: "too many paths", in: sampleJSON(t, set("paths", many(257, "p"))), reason: "too many"},

		// Identities that prove nothing are corrupt, named by field (issue 12).
		{name: "owner start time 0", in: sampleJSON(t, setIn("owner", "start_time", 0)), reason: "owner identity: start_time is missing"},
		{name: "owner without start time", in: sampleJSON(t, delIn("owner", "start_time")), reason: "owner identity: start_time is missing"},
		{name: "owner empty boot id", in: sampleJSON(t, setIn("owner", "boot_id", "")), reason: "owner identity: boot_id is missing"},
		{name: "owner without boot id", in: sampleJSON(t, delIn("owner", "boot_id")), reason: "owner identity: boot_id is missing"},
		{name: "owner empty host", in: sampleJSON(t, setIn("owner", "host", "")), reason: "owner identity: host is missing"},
		{name: "owner without pid", in: sampleJSON(t, delIn("owner", "pid")), reason: "owner pid 0"},
		{name: "subject start time 0", in: sampleJSON(t, setIn("subject", "start_time", 0)), reason: "subject identity: start_time is missing"},
		{name: "subject empty boot id", in: sampleJSON(t, setIn("subject", "boot_id", "")), reason: "subject identity: boot_id is missing"},
		{name: "subject without host", in: sampleJSON(t, delIn("subject", "host")), reason: "subject identity: host is missing"},
		{name: "subject pid negative", in: sampleJSON(t, setIn("subject", "pid", -7)), reason: "subject pid -7"},
		{name: "pgid 1", in: sampleJSON(t, func(m map[string]any) { m["subject"].(map[string]any)["pid"] = 1; m["pgid"] = 1 }), reason: "pgid 1 is not a process group"},
		{name: "pgid negative", in: sampleJSON(t, set("pgid", -4343)), reason: "pgid -4343"},
		{name: "owner boot id with a newline", in: sampleJSON(t, setIn("owner", "boot_id", "b\n")), reason: "control character"},

		// Text is valid UTF-8 without control characters, never repaired.
		{name: "path with invalid UTF-8", in: bytes.Replace(valid, []byte(`"scratch"`), []byte("\"bad\xff\""), 1), reason: `paths: string "bad\xff": invalid UTF-8`},
		{name: "label with invalid UTF-8", in: bytes.Replace(valid, []byte(`"e2e tmux"`), []byte("\"e2e\xfe\xff\""), 1), reason: "invalid UTF-8"},
		{name: "boot id with invalid UTF-8", in: bytes.Replace(valid, []byte(`"boot_id":"`), []byte("\"boot_id\":\"\xc3"), 1), reason: "boot_id: string"},
		{name: "path with a lone high surrogate", in: bytes.Replace(valid, []byte(`"scratch"`), []byte(`"bad\ud800x"`), 1), reason: "lone surrogate"},
		{name: "socket with a lone low surrogate", in: bytes.Replace(valid, []byte(`"tmux-1"`), []byte(`"tmux-\udcff"`), 1), reason: "sockets: string"},
		{name: "label with ESC", in: sampleJSON(t, set("label", "x\x1b[2Jy")), reason: `label "x\x1b[2Jy": control character U+001B`},
		{name: "label with a newline", in: sampleJSON(t, set("label", "a\nrecover (all) x: root removed")), reason: "control character U+000A"},
		{name: "note with DEL", in: sampleJSON(t, set("note", "a\x7f")), reason: "note"},
		{name: "path with a C1 control", in: sampleJSON(t, set("paths", []string{"a\u0085b"})), reason: "path"},
		{name: "socket with a tab", in: sampleJSON(t, set("sockets", []string{"a\tb"})), reason: "socket"},
		{name: "cgroup with a carriage return", in: sampleJSON(t, set("cgroup", "/sys/fs/cgroup/a\rb")), reason: "cgroup"},
		{name: "path named with a real U+FFFD", in: sampleJSON(t, set("paths", []string{"bad\uFFFD"}))},
		{name: "label with a surrogate pair", in: bytes.Replace(valid, []byte(`"e2e tmux"`), []byte(`"smile \ud83d\ude00"`), 1)},

		// Sockets and paths stay inside the root and off the journal's own entries.
		{name: "absolute socket", in: sampleJSON(t, set("sockets", []string{"/tmp/tmux-0/default"})), reason: "not inside the root"},
		{name: "socket with ..", in: sampleJSON(t, set("sockets", []string{"../other/s"})), reason: "not inside the root"},
		{name: "socket climbing back", in: sampleJSON(t, set("sockets", []string{"a/../../s"})), reason: "not inside the root"},
		{name: "socket unclean", in: sampleJSON(t, set("sockets", []string{"./s"})), reason: "not inside the root"},
		{name: "empty socket", in: sampleJSON(t, set("sockets", []string{""})), reason: "not inside the root"},
		{name: "socket is the root", in: sampleJSON(t, set("sockets", []string{"."})), reason: "not inside the root"},
		{name: "socket with NUL", in: sampleJSON(t, set("sockets", []string{"s\x00"})), reason: "not inside the root"},
		{name: "socket name too long", in: sampleJSON(t, set("sockets", []string{strings.Repeat("s", MaxSocketName+1)})), reason: "longer than"},
		{name: "socket is the lock", in: sampleJSON(t, set("sockets", []string{"lock"})), reason: "journal's own"},
		{name: "socket in records", in: sampleJSON(t, set("sockets", []string{"records/s"})), reason: "journal's own"},
		{name: "socket in leases", in: sampleJSON(t, set("sockets", []string{"leases/s"})), reason: "journal's own"},
		{name: "socket is closing", in: sampleJSON(t, set("sockets", []string{"closing"})), reason: "journal's own"},
		{name: "absolute path", in: sampleJSON(t, set("paths", []string{"/etc"})), reason: "not inside the root"},
		{name: "path ..", in: sampleJSON(t, set("paths", []string{".."})), reason: "not inside the root"},
		{name: "path climbing back", in: sampleJSON(t, set("paths", []string{"a/../../b"})), reason: "not inside the root"},
		{name: "path unclean", in: sampleJSON(t, set("paths", []string{"a//b"})), reason: "not inside the root"},
		{name: "path is the root", in: sampleJSON(t, set("paths", []string{"."})), reason: "not inside the root"},
		{name: "path records", in: sampleJSON(t, set("paths", []string{"records"})), reason: "journal's own"},
		{name: "path in records", in: sampleJSON(t, set("paths", []string{"records/1-2-abcdef01.json"})), reason: "journal's own"},
		{name: "path lock", in: sampleJSON(t, set("paths", []string{"lock"})), reason: "journal's own"},
		{name: "path leases", in: sampleJSON(t, set("paths", []string{"leases"})), reason: "journal's own"},

		// Cgroups.
		{name: "cgroup root", in: sampleJSON(t, set("cgroup", "/sys/fs/cgroup")), reason: "cgroup"},
		{name: "cgroup root with slash", in: sampleJSON(t, set("cgroup", "/sys/fs/cgroup/")), reason: "cgroup"},
		{name: "cgroup climbing out", in: sampleJSON(t, set("cgroup", "/sys/fs/cgroup/../../../tmp")), reason: "cgroup"},
		{name: "cgroup climbing back to the root", in: sampleJSON(t, set("cgroup", "/sys/fs/cgroup/a/..")), reason: "cgroup"},
		{name: "cgroup elsewhere", in: sampleJSON(t, set("cgroup", "/tmp/cg")), reason: "cgroup"},
		{name: "cgroup relative", in: sampleJSON(t, set("cgroup", "sys/fs/cgroup/a")), reason: "cgroup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := Decode(tt.in)
			if tt.reason == "" {
				require.NoError(t, err)
				require.NoError(t, rec.Validate())
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.reason)
			assert.Nil(t, rec)
		})
	}
}

func TestValidNames(t *testing.T) {
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"run-1", true}, {"e2e.tmux_A9", true}, {strings.Repeat("a", 64), true},
		{"", false}, {".", false}, {"..", false}, {".hidden", false}, {"-flag", false},
		{"a/b", false}, {"../x", false}, {"a b", false}, {"a\x00", false}, {strings.Repeat("a", 65), false},
		{"a\n", false},
	} {
		assert.Equal(t, tt.ok, ValidName(tt.name), "%q", tt.name)
	}
	for _, tt := range []struct {
		id string
		ok bool
	}{
		{NewID(testOwner), true}, {"1-0-00000000", true},
		{"0-1-00000000", false}, {"1-1-0000000", false}, {"1-1-000000000", false}, {"a-1-00000000", false},
		{"1-18446744073709551616-00000000", false}, {"1-1-00000000/", false}, {"", false},
	} {
		assert.Equal(t, tt.ok, ValidID(tt.id), "%q", tt.id)
	}
	id := NewID(testOwner)
	assert.True(t, strings.HasPrefix(id, "4242-987654-"), id)
	assert.NotEqual(t, id, NewID(testOwner))
	pid, start, ok := writerOf(id)
	assert.True(t, ok)
	assert.Equal(t, 4242, pid)
	assert.Equal(t, uint64(987654), start)
}

// FuzzDecode feeds arbitrary bytes to the strict decoder: it must never
// panic, and whatever it accepts is valid and survives an encode/decode
// round trip unchanged.
func FuzzDecode(f *testing.F) {
	b, _ := sampleRecord().Encode()
	f.Add(b)
	f.Add([]byte(`{"version":1,"id":"1-2-abcdef01","kind":"process","owner":{"pid":1},"phase":"intent","created":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"Version":1}`))
	f.Add([]byte(`{"version":1,"version":1}`))
	f.Add([]byte(`{"version":2,"id":"1-2-abcdef01","kind":"process","owner":{"pid":1,"start_time":2,"boot_id":"b","uid":0,"host":"h","pid_ns":4026531836},"phase":"intent","created":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"version":1,"id":"1-2-abcdef01","kind":"process","owner":{"pid":1,"start_time":2,"boot_id":"b","uid":0,"host":"h","pid_ns":4026531836},"phase":"intent","created":"2026-01-01T00:00:00Z"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		rec, err := Decode(in)
		if err != nil {
			require.Nil(t, rec)
			return
		}
		require.NoError(t, rec.Validate())
		enc, err := rec.Encode()
		if err != nil {
			// Indentation may push a compact record over the limit.
			require.Contains(t, err.Error(), "over")
			return
		}
		again, err := Decode(enc)
		require.NoError(t, err, "%s", enc)
		enc2, err := again.Encode()
		require.NoError(t, err)
		require.Equal(t, string(enc), string(enc2))
	})
}

// TestNewIDUnique: ids of one writer never repeat (a repeat would make a
// publish replace another record). 32 random bits per id collided about
// once per hundred 10,000-record runs; the per-process sequence cannot.
func TestNewIDUnique(t *testing.T) {
	w := owner.Identity{PID: 4242, StartTime: 99}
	const n = 200000
	seen := make(map[string]bool, n)
	for i := 0; i < n; i++ {
		id := NewID(w)
		require.True(t, ValidID(id), id)
		require.False(t, seen[id], "id %s repeated after %d ids", id, i)
		seen[id] = true
	}
}
