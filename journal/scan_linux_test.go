package journal

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/owner"
)

// scan runs r.Scan, failing the test if it blocks.
func scan(t *testing.T, r *Root) *Scan {
	t.Helper()
	type result struct {
		s   *Scan
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := r.Scan()
		done <- result{s, err}
	}()
	select {
	case res := <-done:
		require.NoError(t, res.err)
		return res.s
	case <-time.After(testroot.Timeout):
		t.Fatal("Scan blocked")
		return nil
	}
}

// encodedRecord returns a valid record of the test process with a fresh id,
// and its encoding.
func encodedRecord(t *testing.T) (*Record, []byte) {
	t.Helper()
	rec := selfRecord(t, "fixture")
	rec.ID = NewID(rec.Owner)
	rec.Version = SchemaVersion
	rec.Created = time.Now().UTC().Truncate(time.Millisecond)
	b, err := rec.Encode()
	require.NoError(t, err)
	return rec, b
}

// plant writes a valid record file directly (no fsync: fast fixtures).
func plant(t *testing.T, r *Root, label string) *Record {
	t.Helper()
	rec, b := encodedRecord(t)
	rec.Label = label
	b, err := rec.Encode()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(r.Path(), recordsDir, rec.ID+".json"), b, 0o600))
	return rec
}

func publish(t *testing.T, r *Root, label string) *Record {
	t.Helper()
	rec := selfRecord(t, label)
	require.NoError(t, r.Publish(context.Background(), rec))
	return rec
}

// requireInUse checks that the root cannot be removed.
func requireInUse(t *testing.T, r *Root, what string) {
	t.Helper()
	x, err := r.LockExclusive(context.Background())
	require.NoError(t, err)
	defer x.Unlock()
	err = x.RemoveRoot()
	require.ErrorIs(t, err, ErrInUse)
	assert.Contains(t, err.Error(), what)
	assert.DirExists(t, r.Path())
	assert.False(t, r.Removed())
}

// TestScanFileChecks: invariant 4. A record file is believed only if it is a
// regular file of ours, single-linked, not group/world-writable, at most 64
// KiB, strictly decoded, of the known version and named after its id.
// Anything else is reported corrupt with its path and reason, never
// believed, left as it is, and keeps the root.
func TestScanFileChecks(t *testing.T) {
	uid, gid := testroot.SecondUser(t)
	write := func(t *testing.T, path string, b []byte, mode os.FileMode) {
		t.Helper()
		require.NoError(t, os.WriteFile(path, b, mode))
		require.NoError(t, os.Chmod(path, mode))
	}
	tests := []struct {
		name   string
		make   func(t *testing.T, recs, id string, valid []byte) string
		reason string
	}{
		{"symlink to a valid record", func(t *testing.T, recs, id string, valid []byte) string {
			target := filepath.Join(testroot.Dir(t), id+".json")
			write(t, target, valid, 0o600)
			require.NoError(t, os.Symlink(target, filepath.Join(recs, id+".json")))
			return id + ".json"
		}, "symlink"},
		{"dangling symlink", func(t *testing.T, recs, id string, valid []byte) string {
			require.NoError(t, os.Symlink("/nonexistent", filepath.Join(recs, id+".json")))
			return id + ".json"
		}, "symlink"},
		{"FIFO", func(t *testing.T, recs, id string, valid []byte) string {
			require.NoError(t, syscall.Mkfifo(filepath.Join(recs, id+".json"), 0o600))
			return id + ".json"
		}, "FIFO"},
		{"directory", func(t *testing.T, recs, id string, valid []byte) string {
			require.NoError(t, os.Mkdir(filepath.Join(recs, id+".json"), 0o700))
			return id + ".json"
		}, "directory"},
		{"socket", func(t *testing.T, recs, id string, valid []byte) string {
			l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(recs, id+".json"), Net: "unix"})
			require.NoError(t, err)
			l.SetUnlinkOnClose(false)
			t.Cleanup(func() { l.Close() })
			return id + ".json"
		}, "not a regular file"},
		{"hard link", func(t *testing.T, recs, id string, valid []byte) string {
			p := filepath.Join(recs, id+".json")
			write(t, p, valid, 0o600)
			require.NoError(t, os.Link(p, filepath.Join(testroot.Dir(t), "elsewhere")))
			return id + ".json"
		}, "2 hard links"},
		{"owned by another user", func(t *testing.T, recs, id string, valid []byte) string {
			p := filepath.Join(recs, id+".json")
			write(t, p, valid, 0o600)
			require.NoError(t, os.Chown(p, uid, gid))
			return id + ".json"
		}, "owned by uid"},
		{"group-writable", func(t *testing.T, recs, id string, valid []byte) string {
			write(t, filepath.Join(recs, id+".json"), valid, 0o620)
			return id + ".json"
		}, "group- or world-writable"},
		{"world-writable", func(t *testing.T, recs, id string, valid []byte) string {
			write(t, filepath.Join(recs, id+".json"), valid, 0o602)
			return id + ".json"
		}, "group- or world-writable"},
		{"larger than 64 KiB", func(t *testing.T, recs, id string, valid []byte) string {
			b := append(append([]byte{}, valid...), bytes.Repeat([]byte(" "), MaxRecordSize+1-len(valid))...)
			write(t, filepath.Join(recs, id+".json"), b, 0o600)
			return id + ".json"
		}, "over the 65536-byte limit"},
		{"empty", func(t *testing.T, recs, id string, valid []byte) string {
			write(t, filepath.Join(recs, id+".json"), nil, 0o600)
			return id + ".json"
		}, "not a record"},
		{"not JSON", func(t *testing.T, recs, id string, valid []byte) string {
			write(t, filepath.Join(recs, id+".json"), []byte("pid=1 start=2\n"), 0o600)
			return id + ".json"
		}, "not a record"},
		{"truncated", func(t *testing.T, recs, id string, valid []byte) string {
			write(t, filepath.Join(recs, id+".json"), valid[:len(valid)/2], 0o600)
			return id + ".json"
		}, "not a record"},
		{"unknown version", func(t *testing.T, recs, id string, valid []byte) string {
			write(t, filepath.Join(recs, id+".json"), bytes.Replace(valid, []byte(`"version": 2`), []byte(`"version": 3`), 1), 0o600)
			return id + ".json"
		}, "unknown schema version 3"},
		{"unknown field", func(t *testing.T, recs, id string, valid []byte) string {
			write(t, filepath.Join(recs, id+".json"), bytes.Replace(valid, []byte(`{`), []byte(`{"extra": true,`), 1), 0o600)
			return id + ".json"
		}, "unknown field"},
		{"file name is not the id", func(t *testing.T, recs, id string, valid []byte) string {
			other := NewID(owner.Identity{PID: 1, StartTime: 2})
			write(t, filepath.Join(recs, other+".json"), valid, 0o600)
			return other + ".json"
		}, "does not match record id"},
		{"unexpected name", func(t *testing.T, recs, id string, valid []byte) string {
			write(t, filepath.Join(recs, "notes.txt"), valid, 0o600)
			return "notes.txt"
		}, "unexpected entry"},
		{"invalid id in the name", func(t *testing.T, recs, id string, valid []byte) string {
			write(t, filepath.Join(recs, "0-1-00000000.json"), valid, 0o600)
			return "0-1-00000000.json"
		}, "unexpected entry"},
		{"FIFO named like a temp file", func(t *testing.T, recs, id string, valid []byte) string {
			require.NoError(t, syscall.Mkfifo(filepath.Join(recs, "."+id+".json12345"), 0o600))
			return "." + id + ".json12345"
		}, "unexpected entry"},
		{"directory named like a temp file", func(t *testing.T, recs, id string, valid []byte) string {
			require.NoError(t, os.Mkdir(filepath.Join(recs, "."+id+".json12345"), 0o700))
			return "." + id + ".json12345"
		}, "unexpected entry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRoot(t)
			rec, valid := encodedRecord(t)
			recs := filepath.Join(r.Path(), recordsDir)
			name := tt.make(t, recs, rec.ID, valid)
			path := filepath.Join(recs, name)
			before := snap(t, path)

			s := scan(t, r)
			assert.Empty(t, s.Records, "never believed")
			assert.Empty(t, s.Temps)
			require.Len(t, s.Corrupt, 1)
			c := s.Corrupt[0]
			assert.Equal(t, path, c.Path)
			assert.Contains(t, c.Reason, tt.reason)
			assert.ErrorIs(t, c, ErrCorrupt)
			assert.Contains(t, c.Error(), path)
			assert.Equal(t, before, snap(t, path), "left as it is")

			requireInUse(t, r, "corrupt "+path)
		})
	}
}

// TestScanBelievesValidRecords: the boundaries of the checks that still pass.
func TestScanBelievesValidRecords(t *testing.T) {
	tests := []struct {
		name string
		edit func(t *testing.T, path string, valid []byte)
	}{
		{"as published", func(t *testing.T, path string, valid []byte) {}},
		{"read-only", func(t *testing.T, path string, valid []byte) { require.NoError(t, os.Chmod(path, 0o400)) }},
		{"exactly 64 KiB", func(t *testing.T, path string, valid []byte) {
			b := append(append([]byte{}, valid...), bytes.Repeat([]byte(" "), MaxRecordSize-len(valid))...)
			require.Len(t, b, MaxRecordSize)
			require.NoError(t, os.WriteFile(path, b, 0o600))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRoot(t)
			rec := publish(t, r, tt.name)
			path := filepath.Join(r.Path(), recordsDir, rec.ID+".json")
			valid, err := os.ReadFile(path)
			require.NoError(t, err)
			tt.edit(t, path, valid)
			s := scan(t, r)
			assert.Empty(t, s.Corrupt)
			require.Len(t, s.Records, 1)
			assert.Equal(t, rec, s.Records[0])
		})
	}
}

// TestScanEntrySwappedAfterListing replaces a record between the listing of
// records/ and its open (through the scanHook seam): ENOENT is progress, and
// a FIFO, symlink or directory swapped in is corrupt, without blocking and
// without following.
func TestScanEntrySwappedAfterListing(t *testing.T) {
	retire := func(t *testing.T, path string, other *Record) { require.NoError(t, os.Remove(path)) }
	replace := func(t *testing.T, path string, other *Record) {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"1")
		require.NoError(t, os.WriteFile(tmp, b, 0o600))
		require.NoError(t, os.Rename(tmp, path))
	}
	tests := []struct {
		name   string
		step   string // "listed" unless set
		swap   func(t *testing.T, path string, other *Record)
		reason string // empty: not corrupt
	}{
		{name: "retired", swap: retire},
		{name: "retired after the open", step: "opened", swap: retire},
		{name: "replaced after the open", step: "opened", swap: replace},
		{name: "replaced by a FIFO", swap: func(t *testing.T, path string, other *Record) {
			require.NoError(t, os.Remove(path))
			require.NoError(t, syscall.Mkfifo(path, 0o600))
		}, reason: "not a regular file"},
		{name: "replaced by a symlink to another record", swap: func(t *testing.T, path string, other *Record) {
			require.NoError(t, os.Remove(path))
			require.NoError(t, os.Symlink(other.ID+".json", path))
		}, reason: "symlink"},
		{name: "replaced by a symlink out of the root", swap: func(t *testing.T, path string, other *Record) {
			require.NoError(t, os.Remove(path))
			require.NoError(t, os.Symlink("/etc/passwd", path))
		}, reason: "symlink"},
		{name: "replaced by a directory", swap: func(t *testing.T, path string, other *Record) {
			require.NoError(t, os.Remove(path))
			require.NoError(t, os.Mkdir(path, 0o700))
		}, reason: "not a regular file"},
		{name: "replaced by a hard link", swap: func(t *testing.T, path string, other *Record) {
			require.NoError(t, os.Link(path, filepath.Join(testroot.Dir(t), "link")))
		}, reason: "hard links"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRoot(t)
			victim := publish(t, r, "victim")
			other := publish(t, r, "other")
			path := filepath.Join(r.Path(), recordsDir, victim.ID+".json")
			swapped := false
			step := tt.step
			if step == "" {
				step = "listed"
			}
			scanHook = func(st, name string) {
				if st == step && name == victim.ID+".json" && !swapped {
					swapped = true
					tt.swap(t, path, other)
				}
			}
			t.Cleanup(func() { scanHook = func(string, string) {} })

			s := scan(t, r)
			require.True(t, swapped)
			if tt.reason == "" {
				// Gone, or believed as it was when opened: never corrupt.
				assert.Empty(t, s.Corrupt)
				var ids []string
				for _, rec := range s.Records {
					ids = append(ids, rec.ID)
				}
				assert.Contains(t, ids, other.ID)
				return
			}
			require.Len(t, s.Records, 1)
			assert.Equal(t, other.ID, s.Records[0].ID)
			require.Len(t, s.Corrupt, 1)
			assert.Equal(t, path, s.Corrupt[0].Path)
			assert.Contains(t, s.Corrupt[0].Reason, tt.reason)
		})
	}
}

// TestScanWhileRetiring: invariant 10 for scans. Records retired (and
// published) by another participant while scanning never show up as errors
// or corrupt records: ENOENT mid-scan is progress.
func TestScanWhileRetiring(t *testing.T) {
	r := newRoot(t)
	other := openRoot(t, r.Path())
	// Fixture records, encoded once, written directly and retired through
	// the API by a second Root, round after round, while r scans.
	const batch = 100
	type fixture struct {
		id string
		b  []byte
	}
	var fixtures []fixture
	for i := range batch {
		rec, _ := encodedRecord(t)
		rec.Label = fmt.Sprint("r", i)
		b, err := rec.Encode()
		require.NoError(t, err)
		fixtures = append(fixtures, fixture{rec.ID, b})
	}
	self, err := owner.Self()
	require.NoError(t, err)
	staging := testroot.Dir(t)
	stop := make(chan struct{})
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	t.Cleanup(halt) // before the root is closed and removed, if the test fails
	wg.Add(2)
	go func() { // retirer
		defer wg.Done()
		for {
			for _, f := range fixtures {
				// Written elsewhere and renamed in: a record appears whole.
				tmp := filepath.Join(staging, f.id)
				if err := os.WriteFile(tmp, f.b, 0o600); err != nil {
					errs <- err
					return
				}
				if err := os.Rename(tmp, filepath.Join(r.Path(), recordsDir, f.id+".json")); err != nil {
					errs <- err
					return
				}
			}
			for _, f := range fixtures {
				if err := other.Retire(f.id); err != nil {
					errs <- err
					return
				}
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	go func() { // publisher: temp files and renames in flight
		defer wg.Done()
		for {
			rec := &Record{Kind: KindProcess, Label: "churn", Owner: self, Subject: &self, Phase: PhaseLive}
			if err := other.Publish(context.Background(), rec); err != nil {
				errs <- err
				return
			}
			if err := other.Retire(rec.ID); err != nil {
				errs <- err
				return
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	seen := 0
	deadline := time.Now().Add(testroot.Timeout)
	for i := 0; i < 200 || seen < batch; i++ {
		require.True(t, time.Now().Before(deadline), "the scans never overlapped the churn")
		s, err := r.Scan()
		require.NoError(t, err)
		require.Empty(t, s.Corrupt)
		for _, rec := range s.Records {
			require.Contains(t, []string{"churn", "r"}, strings.TrimRight(rec.Label, "0123456789"))
		}
		seen += len(s.Records)
	}
	halt()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	s := scan(t, r)
	assert.Empty(t, s.Records)
	assert.Empty(t, s.Corrupt)
	assert.Empty(t, s.Temps)
}

// TestConcurrentScansOfOneRoot: a *Root is safe for concurrent use; scans
// through one Root do not share a directory offset.
func TestConcurrentScansOfOneRoot(t *testing.T) {
	r := newRoot(t)
	const n = 100
	for i := range n {
		plant(t, r, fmt.Sprint(i))
	}
	var wg sync.WaitGroup
	counts := make(chan int, 64)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				s, err := r.Scan()
				if err != nil {
					counts <- -1
					return
				}
				counts <- len(s.Records) + 1000*len(s.Corrupt)
			}
		}()
	}
	go func() { wg.Wait(); close(counts) }()
	for c := range counts {
		require.Equal(t, n, c)
	}
}

func TestPublishAndRetire(t *testing.T) {
	r := newRoot(t)
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })

	rec := selfRecord(t, "intent")
	rec.Phase = PhaseIntent
	rec.Subject = nil
	require.NoError(t, r.Publish(context.Background(), rec))
	assert.True(t, ValidID(rec.ID))
	assert.True(t, strings.HasPrefix(rec.ID, fmt.Sprintf("%d-%d-", rec.Owner.PID, rec.Owner.StartTime)), "the id names its writer")
	assert.Equal(t, SchemaVersion, rec.Version)
	assert.False(t, rec.Created.IsZero())
	path := filepath.Join(r.Path(), recordsDir, rec.ID+".json")
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o600), fi.Mode(), "0600 whatever the umask")

	// Intent → live replaces the record under the same id.
	self := rec.Owner
	rec.Phase, rec.Subject = PhaseLive, &self
	require.NoError(t, r.Publish(context.Background(), rec))
	s := scan(t, r)
	require.Len(t, s.Records, 1)
	assert.Equal(t, PhaseLive, s.Records[0].Phase)

	// A record whose file went group-writable is corrupt; republishing it
	// writes a 0600 file again (the mode is not copied over).
	require.NoError(t, os.Chmod(path, 0o660))
	require.Len(t, scan(t, r).Corrupt, 1)
	require.NoError(t, r.Publish(context.Background(), rec))
	fi, err = os.Lstat(path)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o600), fi.Mode())
	s = scan(t, r)
	assert.Empty(t, s.Corrupt)
	require.Len(t, s.Records, 1)

	// An invalid record is refused before anything is written.
	bad := selfRecord(t, "bad")
	bad.Paths = []string{"../outside"}
	require.ErrorIs(t, r.Publish(context.Background(), bad), ErrBadName)
	assert.Len(t, scan(t, r).Records, 1)
	assert.Empty(t, scan(t, r).Temps)

	require.NoError(t, r.Retire(rec.ID))
	assert.NoFileExists(t, path)
	require.ErrorIs(t, r.Retire(rec.ID), ErrNotFound)
	require.ErrorIs(t, r.Retire("../lock"), ErrBadName)
	assert.FileExists(t, filepath.Join(r.Path(), lockName))
}

// recordsEntries checks, without Scan, that every entry in records/ is a
// complete valid record or a temp file written by one of writers; it returns
// the temp files.
func recordsEntries(t *testing.T, r *Root, writers ...owner.Identity) (records, temps []string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(r.Path(), recordsDir))
	require.NoError(t, err)
	for _, e := range ents {
		name := e.Name()
		if m := tempRE.FindStringSubmatch(name); m != nil {
			pid, start, ok := writerOf(m[1])
			require.True(t, ok, name)
			found := false
			for _, w := range writers {
				found = found || (w.PID == pid && w.StartTime == start)
			}
			require.True(t, found, "temp file %s of an unknown writer", name)
			temps = append(temps, name)
			continue
		}
		id, ok := strings.CutSuffix(name, ".json")
		require.True(t, ok, "unexpected entry %s", name)
		b, err := os.ReadFile(filepath.Join(r.Path(), recordsDir, name))
		require.NoError(t, err)
		rec, err := Decode(b)
		require.NoError(t, err, "half-written record %s: %q", name, b)
		require.Equal(t, id, rec.ID)
		records = append(records, id)
	}
	return records, temps
}

// TestPublishCrash: invariant 3. A writer SIGKILLed at each step of a
// publish leaves either nothing but a temp file that names it (reported in
// Scan.Temps, removable once the writer is dead) or the complete record.
func TestPublishCrash(t *testing.T) {
	for _, step := range []string{"written", "renamed", "synced"} {
		t.Run(step, func(t *testing.T) {
			r := newRoot(t)
			c := startChild(t, "publish", r, "OJ_N=1", "OJ_STOP="+step, "OJ_LABEL=crash")
			writer := identityOf(t, c.WaitReady("stopped"))
			require.Equal(t, c.PID(), writer.PID)
			c.Kill()
			assert.Equal(t, owner.Dead, owner.Check(writer).State)

			records, temps := recordsEntries(t, r, writer)
			s := scan(t, r)
			assert.Empty(t, s.Corrupt)
			if step == "written" {
				assert.Empty(t, records)
				assert.Empty(t, s.Records)
				require.Len(t, temps, 1)
				require.Len(t, s.Temps, 1)
				tf := s.Temps[0]
				assert.Equal(t, temps[0], tf.Name)
				assert.Equal(t, writer.PID, tf.Writer.PID)
				assert.Equal(t, writer.StartTime, tf.Writer.StartTime)
				// The temp file keeps the root until it is removed.
				requireInUse(t, r, "temp file "+tf.Name)
				require.NoError(t, r.RemoveTemp(tf))
				assert.NoFileExists(t, filepath.Join(r.Path(), recordsDir, tf.Name))
				require.NoError(t, r.RemoveTemp(tf), "ENOENT is progress")
			} else {
				assert.Empty(t, temps)
				assert.Empty(t, s.Temps)
				require.Len(t, s.Records, 1)
				rec := s.Records[0]
				assert.Equal(t, "crash-0", rec.Label)
				assert.Equal(t, writer, rec.Owner)
				assert.True(t, strings.HasPrefix(rec.ID, fmt.Sprintf("%d-%d-", writer.PID, writer.StartTime)))
				requireInUse(t, r, "record "+rec.ID)
				require.NoError(t, r.Retire(rec.ID))
			}
			s = scan(t, r)
			assert.Empty(t, s.Records)
			assert.Empty(t, s.Temps)
			require.NoError(t, teardown(context.Background(), r))
			assert.NoDirExists(t, r.Path())
		})
	}
}

// TestPublishCrashAnywhere kills writers publishing in a loop at whatever
// point they reached: every file left is a complete record or a temp file of
// a dead writer.
func TestPublishCrashAnywhere(t *testing.T) {
	r := newRoot(t)
	var writers []owner.Identity
	for round := range 4 {
		c := startChild(t, "publish", r, "OJ_N=0", fmt.Sprint("OJ_LABEL=loop", round))
		writers = append(writers, identityOf(t, c.WaitReady("first")))
		c.Kill()
	}
	records, temps := recordsEntries(t, r, writers...)
	s := scan(t, r)
	assert.Empty(t, s.Corrupt)
	assert.Len(t, s.Records, len(records))
	assert.Len(t, s.Temps, len(temps))
	for _, tf := range s.Temps {
		assert.Equal(t, owner.Dead, owner.Check(owner.Identity{PID: tf.Writer.PID, StartTime: tf.Writer.StartTime, BootID: writers[0].BootID, UID: writers[0].UID, Host: writers[0].Host}).State)
		require.NoError(t, r.RemoveTemp(tf))
	}
	for _, rec := range s.Records {
		require.NoError(t, r.Retire(rec.ID))
	}
	require.NoError(t, teardown(context.Background(), r))
	t.Logf("%d records, %d temp files", len(records), len(temps))
}

func TestRemoveTempRefusesOtherNames(t *testing.T) {
	r := newRoot(t)
	rec := publish(t, r, "keep")
	for _, name := range []string{rec.ID + ".json", "../lock", "lock", ".x.json1", "." + rec.ID + ".json", "." + rec.ID + ".json1/../../lock"} {
		require.ErrorIs(t, r.RemoveTemp(TempFile{Name: name}), ErrBadName, name)
	}
	assert.Len(t, scan(t, r).Records, 1)
	assert.FileExists(t, filepath.Join(r.Path(), lockName))
}

// TestConcurrentPublishers: 8 processes publishing 200 records each at once
// lose nothing.
func TestConcurrentPublishers(t *testing.T) {
	r := newRoot(t)
	const procs, each = 8, 200
	var children []*testroot.Child
	for i := range procs {
		c := startChild(t, "publish", r, fmt.Sprint("OJ_N=", each), "OJ_GO=1", fmt.Sprint("OJ_LABEL=p", i))
		children = append(children, c)
	}
	for _, c := range children {
		c.WaitReady("up")
	}
	for _, c := range children {
		c.Send("go")
	}
	for _, c := range children {
		c.WaitReady("done")
		require.NoError(t, c.Wait(), c.Stderr())
	}
	s := scan(t, r)
	assert.Empty(t, s.Corrupt)
	assert.Empty(t, s.Temps)
	require.Len(t, s.Records, procs*each)
	labels := map[string]bool{}
	for _, rec := range s.Records {
		labels[rec.Label] = true
	}
	for i := range procs {
		for j := range each {
			require.True(t, labels[fmt.Sprintf("p%d-%d", i, j)], "p%d-%d lost", i, j)
		}
	}
}
