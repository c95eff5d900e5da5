package journal

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/owner"
)

func waitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testroot.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// shortCtx is a context that expires soon: to show that something blocks.
func shortCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

// grandchild takes over the grandchild a child reported: it is SIGKILLed
// through a verified handle and reaped at cleanup.
func grandchild(t *testing.T, c *testroot.Child) *owner.Process {
	t.Helper()
	var id owner.Identity
	require.NoError(t, json.Unmarshal(c.WaitReady("grandchild"), &id))
	p, err := owner.Open(id)
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Signal(syscall.SIGKILL)
		p.Wait(context.Background())
		p.Close()
		var ws unix.WaitStatus
		unix.Wait4(id.PID, &ws, unix.WNOHANG, nil)
	})
	return p
}

// noTombstones checks that nothing named after the removed root is left
// next to it.
func noTombstones(t *testing.T, path string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	for _, e := range ents {
		assert.NotContains(t, e.Name(), filepath.Base(path), "left next to the root")
	}
}

// TestAdmissionGate: invariant 8. Once the root is marked closing no new
// admission is granted, the exclusive lock waits for the creator admitted
// before, that creator can still record what it made, and the scan under the
// exclusive lock sees it.
func TestAdmissionGate(t *testing.T) {
	r := newRoot(t)
	c := startChild(t, "admit", r)
	creator := identityOf(t, c.WaitReady("admitted"))

	require.NoError(t, r.MarkClosing())
	closing, err := r.Closing()
	require.NoError(t, err)
	assert.True(t, closing)
	adm, err := r.Admit(waitCtx(t))
	require.ErrorIs(t, err, ErrClosing)
	assert.Nil(t, adm)
	require.ErrorIs(t, r.Publish(waitCtx(t), selfRecord(t, "late")), ErrClosing)

	x, err := r.LockExclusive(shortCtx(t))
	require.ErrorIs(t, err, context.DeadlineExceeded, "teardown waits for the admitted creator")
	assert.Nil(t, x)
	x, err = r.TryLockExclusive()
	require.NoError(t, err)
	assert.Nil(t, x, "busy")

	c.Send("publish")
	var res childResult
	require.NoError(t, json.Unmarshal(c.WaitReady("published"), &res))
	require.Empty(t, res.Err, "an admitted creator records what it made, closing or not")

	c.CloseStdin()
	require.NoError(t, c.Wait())
	x, err = r.LockExclusive(waitCtx(t))
	require.NoError(t, err)
	defer x.Unlock()
	s := scan(t, r)
	require.Len(t, s.Records, 1)
	assert.Equal(t, res.ID, s.Records[0].ID)
	assert.Equal(t, creator, s.Records[0].Owner)
}

// TestAdmissionReleasedWhenCreatorDies: a SIGKILLed creator's admission is
// released by the kernel, even though a daemon it started lives on (the lock
// is close-on-exec).
func TestAdmissionReleasedWhenCreatorDies(t *testing.T) {
	r := newRoot(t)
	c := startChild(t, "admit", r, "OJ_SPAWN=1")
	c.WaitReady("admitted")
	daemon := grandchild(t, c)
	x, err := r.TryLockExclusive()
	require.NoError(t, err)
	require.Nil(t, x)

	c.Kill()
	require.False(t, daemon.Exited())
	x, err = r.TryLockExclusive()
	require.NoError(t, err)
	require.NotNil(t, x, "the daemon must not hold the creator's admission")
	require.NoError(t, x.Unlock())
}

func TestAdmitWaitsForExclusive(t *testing.T) {
	r := newRoot(t)
	other := openRoot(t, r.Path())
	x, err := other.LockExclusive(waitCtx(t))
	require.NoError(t, err)

	adm, err := r.Admit(shortCtx(t))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Nil(t, adm)

	require.NoError(t, x.Unlock())
	adm, err = r.Admit(waitCtx(t))
	require.NoError(t, err)
	adm2, err := r.Admit(waitCtx(t))
	require.NoError(t, err, "admissions of one Root share the shared lock")

	// This process holds admissions: its own exclusive request is refused
	// at once rather than deadlocking, and another Root waits.
	_, err = r.LockExclusive(waitCtx(t))
	require.Error(t, err)
	x, err = r.TryLockExclusive()
	require.NoError(t, err)
	assert.Nil(t, x)
	_, err = other.LockExclusive(shortCtx(t))
	require.ErrorIs(t, err, context.DeadlineExceeded)

	adm.Done()
	adm.Done() // idempotent: must not release adm2's share
	_, err = other.LockExclusive(shortCtx(t))
	require.ErrorIs(t, err, context.DeadlineExceeded, "adm2 still holds the lock")
	adm2.Done()
	x, err = other.LockExclusive(waitCtx(t))
	require.NoError(t, err)
	require.NoError(t, x.Unlock())
}

// TestAdmissionDoneAfterClose: Close releases the lock; a later Done must not
// corrupt the count.
func TestAdmissionDoneAfterClose(t *testing.T) {
	path := testroot.Dir(t)
	r, err := Open(path)
	require.NoError(t, err)
	adm, err := r.Admit(waitCtx(t))
	require.NoError(t, err)
	require.NoError(t, r.Close())
	adm.Done()
	r.mu.Lock()
	n := r.sharedN
	r.mu.Unlock()
	assert.Equal(t, 0, n)

	other := openRoot(t, path)
	x, err := other.TryLockExclusive()
	require.NoError(t, err)
	require.NotNil(t, x, "Close released the admission")
	require.NoError(t, x.Unlock())
}

func TestMarkClosing(t *testing.T) {
	r := newRoot(t)
	closing, err := r.Closing()
	require.NoError(t, err)
	assert.False(t, closing)
	publish(t, r, "before")

	require.NoError(t, r.MarkClosing())
	require.NoError(t, r.MarkClosing(), "idempotent")
	assert.FileExists(t, filepath.Join(r.Path(), closingName))

	other := openRoot(t, r.Path())
	for _, root := range []*Root{r, other} {
		closing, err := root.Closing()
		require.NoError(t, err)
		assert.True(t, closing)
		_, err = root.Admit(waitCtx(t))
		require.ErrorIs(t, err, ErrClosing)
		require.ErrorIs(t, root.Publish(waitCtx(t), selfRecord(t, "after")), ErrClosing)
	}
	assert.Len(t, scan(t, r).Records, 1)
	assert.NotContains(t, scan(t, r).Extra, closingName, "the marker is the journal's own")
}

// TestRemoveRoot: invariant 9 (the journal's part). After removal the
// directory is gone, nothing is left next to it, and every later use
// reports ErrClosing (or succeeds as a no-op) without recreating anything.
func TestRemoveRoot(t *testing.T) {
	r := newRoot(t)
	other := openRoot(t, r.Path())
	rec := publish(t, r, "done")
	require.NoError(t, r.Retire(rec.ID))

	require.NoError(t, teardown(waitCtx(t), r))
	assert.NoDirExists(t, r.Path())
	noTombstones(t, r.Path())

	for name, root := range map[string]*Root{"remover": r, "other": other} {
		t.Run(name, func(t *testing.T) {
			assert.True(t, root.Removed())
			closing, err := root.Closing()
			require.NoError(t, err)
			assert.True(t, closing)
			_, err = root.Admit(waitCtx(t))
			require.ErrorIs(t, err, ErrClosing)
			require.ErrorIs(t, root.Publish(waitCtx(t), selfRecord(t, "late")), ErrClosing)
			_, err = root.LockExclusive(waitCtx(t))
			require.ErrorIs(t, err, ErrClosing)
			_, err = root.TryLockExclusive()
			require.ErrorIs(t, err, ErrClosing)
			require.NoError(t, root.MarkClosing())
			require.NoError(t, teardown(waitCtx(t), root))
			assert.NoDirExists(t, root.Path(), "nothing recreated")
			noTombstones(t, root.Path())
		})
	}
	_, err := Open(r.Path())
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestRemoveRootTwiceWithOneLock(t *testing.T) {
	r := newRoot(t)
	x, err := r.LockExclusive(waitCtx(t))
	require.NoError(t, err)
	require.NoError(t, x.RemoveRoot())
	require.NoError(t, x.RemoveRoot())
	require.NoError(t, x.Unlock())
	assert.NoDirExists(t, r.Path())
}

// TestRemoveRootRefuses: the root is kept (ErrInUse, naming what is left)
// while a record, a temp file, a held lease or any entry the journal does
// not own remains; once that is gone, removal succeeds.
func TestRemoveRootRefuses(t *testing.T) {
	tests := []struct {
		name string
		add  func(t *testing.T, r *Root) (left string, clear func())
	}{
		{"record", func(t *testing.T, r *Root) (string, func()) {
			rec := publish(t, r, "live")
			return "record " + rec.ID, func() { require.NoError(t, r.Retire(rec.ID)) }
		}},
		{"intent record", func(t *testing.T, r *Root) (string, func()) {
			rec := selfRecord(t, "intent")
			rec.Phase, rec.Subject = PhaseIntent, nil
			require.NoError(t, r.Publish(waitCtx(t), rec))
			return "record " + rec.ID, func() { require.NoError(t, r.Retire(rec.ID)) }
		}},
		{"temp file", func(t *testing.T, r *Root) (string, func()) {
			rec, b := encodedRecord(t)
			name := "." + rec.ID + ".json12345"
			require.NoError(t, os.WriteFile(filepath.Join(r.Path(), recordsDir, name), b[:10], 0o600))
			return "temp file " + name, func() {
				s := scan(t, r)
				require.Len(t, s.Temps, 1)
				require.NoError(t, r.RemoveTemp(s.Temps[0]))
			}
		}},
		{"corrupt record", func(t *testing.T, r *Root) (string, func()) {
			p := filepath.Join(r.Path(), recordsDir, "notes")
			require.NoError(t, os.WriteFile(p, nil, 0o600))
			return "corrupt " + p, func() { require.NoError(t, os.Remove(p)) }
		}},
		{"held lease", func(t *testing.T, r *Root) (string, func()) {
			holder, err := Open(r.Path())
			require.NoError(t, err)
			_, err = holder.Lease()
			require.NoError(t, err)
			return "lease of live participant", func() { require.NoError(t, holder.Close()) }
		}},
		{"file", func(t *testing.T, r *Root) (string, func()) {
			p := filepath.Join(r.Path(), "scratch.txt")
			require.NoError(t, os.WriteFile(p, nil, 0o600))
			return "unrecorded entry scratch.txt", func() { require.NoError(t, os.Remove(p)) }
		}},
		{"directory", func(t *testing.T, r *Root) (string, func()) {
			p := filepath.Join(r.Path(), "work")
			require.NoError(t, os.MkdirAll(filepath.Join(p, "deep"), 0o700))
			return "unrecorded entry work", func() { require.NoError(t, os.RemoveAll(p)) }
		}},
		{"socket", func(t *testing.T, r *Root) (string, func()) {
			l, err := net.Listen("unix", filepath.Join(r.Path(), "tmux-1"))
			require.NoError(t, err)
			return "unrecorded entry tmux-1", func() { require.NoError(t, l.Close()) }
		}},
		{"symlink", func(t *testing.T, r *Root) (string, func()) {
			p := filepath.Join(r.Path(), "link")
			require.NoError(t, os.Symlink("/", p))
			return "unrecorded entry link", func() { require.NoError(t, os.Remove(p)) }
		}},
		{"recorded path", func(t *testing.T, r *Root) (string, func()) {
			p := filepath.Join(r.Path(), "work")
			require.NoError(t, os.Mkdir(p, 0o700))
			rec := selfRecord(t, "scratch owner")
			rec.Paths = []string{"work/deep"}
			require.NoError(t, r.Publish(waitCtx(t), rec))
			return "record " + rec.ID + ", recorded path work", func() {
				require.NoError(t, r.Retire(rec.ID))
				require.NoError(t, os.Remove(p))
			}
		}},
		{"many records", func(t *testing.T, r *Root) (string, func()) {
			var ids []string
			for i := 0; i < 1200; i++ {
				ids = append(ids, publish(t, r, "many").ID)
			}
			sort.Strings(ids)
			return "1,200 records, e.g. " + strings.Join(ids[:3], ", ") + ": root in use", func() {
				for _, id := range ids {
					require.NoError(t, r.Retire(id))
				}
			}
		}},
		{"unknown entry in leases", func(t *testing.T, r *Root) (string, func()) {
			p := filepath.Join(r.Path(), leasesDir, "garbage")
			require.NoError(t, os.WriteFile(p, nil, 0o600))
			return "unrecorded entry leases/garbage", func() { require.NoError(t, os.Remove(p)) }
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRoot(t)
			left, clear := tt.add(t, r)
			before := snap(t, r.Path())
			requireInUse(t, r, left)
			assert.Equal(t, before, snap(t, r.Path()), "nothing removed")

			clear()
			require.NoError(t, teardown(waitCtx(t), r))
			assert.NoDirExists(t, r.Path())
			noTombstones(t, r.Path())
		})
	}
}

// TestConcurrentTeardownProcesses: two processes tearing the same root down
// at once both succeed; the root is removed once and nothing is left.
func TestConcurrentTeardownProcesses(t *testing.T) {
	for round := range 3 {
		r := newRoot(t)
		a := startChild(t, "teardown", r)
		b := startChild(t, "teardown", r)
		a.WaitReady("up")
		b.WaitReady("up")
		a.Send("go")
		b.Send("go")
		for _, c := range []*testroot.Child{a, b} {
			var res childResult
			require.NoError(t, json.Unmarshal(c.WaitReady("result"), &res))
			require.Empty(t, res.Err, "round %d", round)
			require.NoError(t, c.Wait())
		}
		assert.NoDirExists(t, r.Path())
		noTombstones(t, r.Path())
	}
}

// TestConcurrentTeardownRoots: the same with several Roots in one process.
func TestConcurrentTeardownRoots(t *testing.T) {
	path := testroot.Dir(t)
	var roots []*Root
	for range 4 {
		roots = append(roots, openRoot(t, path))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(roots))
	for i, r := range roots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = teardown(waitCtx(t), r)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	assert.NoDirExists(t, path)
	noTombstones(t, path)
}

// TestRemoveRootLateClosingMarker: a participant that checked the root was
// linked just before the rename may still create the closing marker in the
// tombstone; RemoveRoot removes it and still removes the root.
func TestRemoveRootLateClosingMarker(t *testing.T) {
	r := newRoot(t)
	late := openRoot(t, r.Path())
	removeRootHook = func() {
		f, err := late.Dir().OpenFile(closingName, os.O_CREATE|os.O_WRONLY, 0o600)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	t.Cleanup(func() { removeRootHook = func() {} })
	require.NoError(t, teardown(waitCtx(t), r))
	assert.NoDirExists(t, r.Path())
	noTombstones(t, r.Path())
}

// TestLeaseOfChild: a lease held by a live process is LeaseHeld and cannot
// be removed; once the process is SIGKILLed (and reaped) it is LeaseFree at
// once, even though a daemon the process started lives on, and removable.
func TestLeaseOfChild(t *testing.T) {
	r := newRoot(t)
	c := startChild(t, "lease", r, "OJ_SPAWN=1")
	id := identityOf(t, c.WaitReady("leased"))
	daemon := grandchild(t, c)

	st, err := r.LeaseOf(id)
	require.NoError(t, err)
	assert.Equal(t, LeaseHeld, st)
	s := scan(t, r)
	require.Len(t, s.Leases, 1)
	lf := s.Leases[0]
	assert.Equal(t, id.PID, lf.Participant.PID)
	assert.Equal(t, id.StartTime, lf.Participant.StartTime)
	removed, err := r.RemoveFreeLease(lf)
	require.NoError(t, err)
	assert.False(t, removed)
	leasePath := filepath.Join(r.Path(), leasesDir, lf.Name)
	assert.FileExists(t, leasePath)
	requireInUse(t, r, "lease of live participant")

	c.Kill()
	require.False(t, daemon.Exited())
	st, err = r.LeaseOf(id)
	require.NoError(t, err)
	assert.Equal(t, LeaseFree, st, "the daemon must not hold the lease")
	removed, err = r.RemoveFreeLease(lf)
	require.NoError(t, err)
	assert.True(t, removed)
	assert.NoFileExists(t, leasePath)
	st, err = r.LeaseOf(id)
	require.NoError(t, err)
	assert.Equal(t, LeaseNone, st)
	removed, err = r.RemoveFreeLease(lf)
	require.NoError(t, err)
	assert.True(t, removed, "ENOENT is progress")
}

// TestRemoveFreeLeaseOnlyFree: of two leases, only the dead participant's is
// removed; RemoveRoot itself clears free leases but keeps the root for a
// held one.
func TestRemoveFreeLeaseOnlyFree(t *testing.T) {
	r := newRoot(t)
	alive := startChild(t, "lease", r)
	aliveID := identityOf(t, alive.WaitReady("leased"))
	dead := startChild(t, "lease", r)
	deadID := identityOf(t, dead.WaitReady("leased"))
	dead.Kill()

	s := scan(t, r)
	require.Len(t, s.Leases, 2)
	for _, lf := range s.Leases {
		removed, err := r.RemoveFreeLease(lf)
		require.NoError(t, err)
		assert.Equal(t, lf.Participant.PID == deadID.PID, removed, "lease %s", lf.Name)
	}
	s = scan(t, r)
	require.Len(t, s.Leases, 1)
	assert.Equal(t, aliveID.PID, s.Leases[0].Participant.PID)

	requireInUse(t, r, "lease of live participant")
	alive.Kill()
	st, err := r.LeaseOf(aliveID)
	require.NoError(t, err)
	assert.Equal(t, LeaseFree, st)
	require.NoError(t, teardown(waitCtx(t), r), "free leases do not keep the root")
	assert.NoDirExists(t, r.Path())
}

func TestLeaseSelf(t *testing.T) {
	r := newRoot(t)
	other := openRoot(t, r.Path())
	self, err := owner.Self()
	require.NoError(t, err)

	st, err := r.LeaseOf(self)
	require.NoError(t, err)
	assert.Equal(t, LeaseNone, st)

	l, err := r.Lease()
	require.NoError(t, err)
	l2, err := r.Lease()
	require.NoError(t, err)
	assert.Same(t, l, l2, "one lease per Root")
	for _, root := range []*Root{r, other} {
		st, err := root.LeaseOf(self)
		require.NoError(t, err)
		assert.Equal(t, LeaseHeld, st)
	}
	_, err = other.Lease()
	require.Error(t, err, "the lease is held through r")

	require.NoError(t, r.ReleaseLease())
	require.NoError(t, r.ReleaseLease())
	st, err = other.LeaseOf(self)
	require.NoError(t, err)
	assert.Equal(t, LeaseNone, st, "released and removed")

	_, err = other.Lease()
	require.NoError(t, err)
	require.NoError(t, other.Close())
	st, err = r.LeaseOf(self)
	require.NoError(t, err)
	assert.Equal(t, LeaseNone, st, "Close releases and removes the lease")
	assert.Empty(t, scan(t, r).Leases)
	name, ok := leaseName(self)
	require.True(t, ok)
	assert.True(t, strings.HasPrefix(name, leasesDir+"/"))
}

// within runs f, failing the test if it blocks.
func within(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(testroot.Timeout):
		t.Fatal("blocked")
	}
}

// TestLockFilesReplacedByFIFO: a FIFO in place of the lock file or a lease
// file is refused without blocking the open (O_NONBLOCK).
func TestLockFilesReplacedByFIFO(t *testing.T) {
	// Not newRoot: its cleanup (Close) would wait for a blocked Admit.
	r, err := Open(testroot.Dir(t))
	require.NoError(t, err)
	lock := filepath.Join(r.Path(), lockName)
	require.NoError(t, os.Remove(lock))
	require.NoError(t, syscall.Mkfifo(lock, 0o600))
	within(t, func() {
		_, err := r.Admit(waitCtx(t))
		assert.ErrorIs(t, err, ErrUnsafeRoot)
		_, err = r.LockExclusive(waitCtx(t))
		assert.ErrorIs(t, err, ErrUnsafeRoot)
		_, err = r.TryLockExclusive()
		assert.ErrorIs(t, err, ErrUnsafeRoot)
	})

	id, err := owner.Self()
	require.NoError(t, err)
	id.PID, id.StartTime = 1, 1
	name, ok := leaseName(id)
	require.True(t, ok)
	require.NoError(t, syscall.Mkfifo(filepath.Join(r.Path(), name), 0o600))
	within(t, func() {
		_, err := r.LeaseOf(id)
		assert.ErrorIs(t, err, ErrUnsafeRoot)
	})
	require.NoError(t, r.Close())
}

// TestLeaseOfAnotherBoot: leases are per boot. A lease file of an earlier
// boot, even one a live process holds (forged), is never proof of life; a
// free lease named the way version 1 named leases (no boot id) is never
// proof of death for the current process with that PID and start time.
func TestLeaseOfAnotherBoot(t *testing.T) {
	r := newRoot(t)
	self, err := owner.Self()
	require.NoError(t, err)
	earlier := self
	earlier.BootID = "00000000-0000-4000-8000-000000000000"
	name, ok := leaseName(earlier)
	require.True(t, ok)
	f, err := os.OpenFile(filepath.Join(r.Path(), name), os.O_CREATE|os.O_RDONLY, 0o600)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	st, err := r.LeaseOf(earlier)
	require.NoError(t, err)
	assert.Equal(t, LeaseNone, st, "a held lease of an earlier boot proves nothing")

	legacy := filepath.Join(r.Path(), leasesDir, strconv.Itoa(self.PID)+"-"+strconv.FormatUint(self.StartTime, 10))
	require.NoError(t, os.WriteFile(legacy, nil, 0o600))
	st, err = r.LeaseOf(self)
	require.NoError(t, err)
	assert.Equal(t, LeaseNone, st, "a free lease without a boot id is not this process's")

	s := scan(t, r)
	require.Len(t, s.Leases, 2)
	for _, l := range s.Leases {
		assert.NotEqual(t, self, l.Participant)
	}
	// The legacy file is free: a teardown removes it; the held one stays.
	x, err := r.LockExclusive(waitCtx(t))
	require.NoError(t, err)
	defer x.Unlock()
	require.ErrorIs(t, x.RemoveRoot(), ErrInUse)
	assert.NoFileExists(t, legacy)
}
