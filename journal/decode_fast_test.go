package journal

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/owner"
)

// fastSample is a record with every field set, in the form Encode writes.
func fastSample(t testing.TB) []byte {
	t.Helper()
	id := owner.Identity{PID: 4242, StartTime: 987654, BootID: "0d6e5e8a-1111-4c1e-9f7e-3b2a1c0d9e8f", UID: 1000, Host: "ci-runner", PIDNS: 4026532178}
	rec := &Record{Version: SchemaVersion, ID: "4242-987654-0a1b2c3d", Kind: KindTmux, Label: "e2e tmux 3", Subject: &id, Owner: id,
		PGID: 4242, Sockets: []string{"tmux-3"}, Paths: []string{"scratch/w3", "scratch"}, Cgroup: "/sys/fs/cgroup/oj/a", CgroupID: 9,
		Phase: PhaseLive, Created: time.Date(2026, 11, 29, 18, 0, 0, 123e6, time.UTC)}
	b, err := rec.Encode()
	require.NoError(t, err)
	return b
}

// TestDecodeFastTakesEncoded checks that what Encode writes takes the fast
// path and decodes exactly as the strict path does.
func TestDecodeFastTakesEncoded(t *testing.T) {
	in := fastSample(t)
	fast, ok := decodeFast(in)
	require.True(t, ok, "the encoded form must take the fast path")
	strict, err := decodeStrict(in)
	require.NoError(t, err)
	require.Equal(t, strict, fast)
}

// TestDecodeFastKnowsEveryField fails when a field is added to Record or
// owner.Identity and decodeFast does not decode it (it would silently send
// every record carrying it down the slow path).
func TestDecodeFastKnowsEveryField(t *testing.T) {
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			v.SetString("x")
		case reflect.Int:
			v.SetInt(7)
		case reflect.Uint64:
			v.SetUint(8)
		case reflect.Slice:
			v.Set(reflect.ValueOf([]string{"a", "b"}))
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem())
		case reflect.Struct:
			if v.Type() == reflect.TypeOf(time.Time{}) {
				v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)))
				return
			}
			for i := 0; i < v.NumField(); i++ {
				fill(v.Field(i))
			}
		default:
			t.Fatalf("field of kind %v: teach decodeFast and this test", v.Kind())
		}
	}
	var rec Record
	fill(reflect.ValueOf(&rec).Elem())
	b, err := json.Marshal(&rec)
	require.NoError(t, err)
	fast, ok := decodeFast(b)
	require.True(t, ok, "decodeFast declines %s: a field it does not know?", b)
	require.Equal(t, &rec, fast)
}

// FuzzDecodeFast: whatever decodeFast accepts, the strict decoder decodes
// to the same record (and a validation error is the same error).
func FuzzDecodeFast(f *testing.F) {
	f.Add(fastSample(f))
	f.Add([]byte(`{"version":1,"id":"1-2-abcdef01","kind":"process","owner":{"pid":1,"start_time":2,"boot_id":"b","uid":0,"host":"h"},"phase":"intent","created":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"version":1,"sockets":[],"paths":["a", "b"],"pgid":-0,"subject":{}}`))
	f.Add([]byte(`{"version":01}`))
	f.Add([]byte(`{"version":1.0,"version":1}`))
	f.Add([]byte(` {"label":"a\"b","created":"2026-13-01T00:00:00Z"} x`))
	f.Add([]byte(`{"owner":{"pid":9223372036854775808,"start_time":-1}}`))
	f.Add([]byte(`{"version":1,"id":"1-2-abcdef01","kind":"process","owner":{"pid":1,"start_time":2,"boot_id":"b","uid":0,"host":"h","pid_ns":4026531836},"phase":"intent","created":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"version":2,"id":"1-2-abcdef01","kind":"process","owner":{"pid":1,"start_time":2,"boot_id":"b","uid":0,"host":"h","pid_ns":18446744073709551616},"cgroup_id":1,"phase":"intent","created":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"version":2,"cgroup":"/sys/fs/cgroup/a","cgroup_id":01,"owner":{"pid_ns":-0}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		fast, ok := decodeFast(in)
		if !ok {
			return
		}
		ferr := fast.Validate()
		strict, serr := decodeStrict(in)
		if ferr != nil {
			require.Error(t, serr, "%q", in)
			require.Equal(t, ferr.Error(), serr.Error(), "%q", in)
			return
		}
		require.NoError(t, serr, "%q", in)
		require.Equal(t, strict, fast, "%q", in)
		// And the fast path's view survives JSON as the strict one does.
		a, _ := json.Marshal(fast)
		b, _ := json.Marshal(strict)
		require.Equal(t, string(b), string(a))
	})
}
