package journal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/errs"
	"github.com/ownerjournal/ownerjournal/owner"
)

// lockRetry is how often a contended flock is retried while a context
// allows.
const lockRetry = 5 * time.Millisecond

// fileLock is a file opened beneath the root's descriptor to be flocked
// (flock(2) through x/sys): the lock file or a lease file. It is opened
// close-on-exec, so a child the caller starts never inherits the lock.
type fileLock struct {
	f    *os.File
	dir  *os.File // the directory holding it: the root or leases/
	name string   // its name in dir
}

// newFlock opens name (the lock file, or "leases/<name>") through the
// root's descriptors with O_NOFOLLOW and O_NONBLOCK; create adds O_CREAT.
func (r *Root) newFlock(name string, create bool) (*fileLock, error) {
	dir := r.top
	if n, ok := strings.CutPrefix(name, leasesDir+"/"); ok {
		dir, name = r.leases, n
	}
	f, err := r.openAt(dir, name, create)
	if err != nil {
		return nil, err
	}
	return &fileLock{f: f, dir: dir, name: name}, nil
}

// Path is the lock file's path, for messages.
func (l *fileLock) Path() string { return l.f.Name() }

// Close releases the lock and closes the file.
func (l *fileLock) Close() error { return l.f.Close() }

// try takes the lock how (LOCK_SH or LOCK_EX) without waiting; busy is
// (false, nil).
func (l *fileLock) try(how int) (bool, error) {
	for {
		err := unix.Flock(int(l.f.Fd()), how|unix.LOCK_NB)
		switch err {
		case nil:
			return true, nil
		case unix.EINTR:
			continue
		case unix.EWOULDBLOCK:
			return false, nil
		}
		return false, &fs.PathError{Op: "flock", Path: l.Path(), Err: err}
	}
}

// tryContext retries try every lockRetry until it succeeds, fails, or ctx
// ends (then it returns ctx.Err()).
func (l *fileLock) tryContext(ctx context.Context, how int) (bool, error) {
	t := time.NewTicker(lockRetry)
	defer t.Stop()
	for {
		if ok, err := l.try(how); ok || err != nil {
			return ok, err
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-t.C:
		}
	}
}

// openLock opens and locks name (see newFlock) how, waiting up to ctx (no
// wait with a nil ctx). A missing file means the root was removed
// ([ErrClosing]). busy is a nil lock and a nil error.
func (r *Root) openLock(ctx context.Context, name string, how int) (*fileLock, error) {
	fl, err := r.newFlock(name, false)
	if errors.Is(err, fs.ErrNotExist) {
		if r.linked() {
			// The root is still there: its lock file is gone, which is
			// not a removal (a caller would report the root removed).
			return nil, fmt.Errorf("journal: %s has no lock file (open the root again to make it): %w", r.path, err)
		}
		return nil, fmt.Errorf("journal: %s was removed: %w", r.path, ErrClosing)
	}
	if err != nil {
		return nil, err
	}
	var ok bool
	if ctx == nil {
		ok, err = fl.try(how)
	} else {
		ok, err = fl.tryContext(ctx, how)
	}
	if err != nil || !ok {
		fl.Close()
		return nil, err
	}
	if err := r.checkLockFile(fl); err != nil {
		fl.Close()
		return nil, err
	}
	return fl, nil
}

// checkLockFile verifies that the file fl has open is still the entry of
// its directory (through the root's descriptors), a regular file of ours,
// and that the root is still linked, so that a file unlinked or replaced
// between open and lock cannot hand us a lock nobody else sees.
func (r *Root) checkLockFile(fl *fileLock) error {
	got, err := fl.f.Stat()
	if err != nil {
		return fmt.Errorf("journal: %s: %w", fl.Path(), err)
	}
	want, err := statAt(fl.dir, fl.name)
	if err != nil || !sameInode(want, got) || !r.linked() {
		return errs.Quietf(ErrClosing, "journal: %s was removed", r.path)
	}
	if st, ok := got.Sys().(*syscall.Stat_t); !got.Mode().IsRegular() || !ok || int(st.Uid) != geteuid() {
		return &UnsafeError{fl.Path(), "lock file is not a regular file of ours"}
	}
	return nil
}

// Admission is a granted permission to create resources in a root. While it
// is held, teardown waits. Done releases it; Done is idempotent.
type Admission struct {
	r    *Root
	done bool
}

// Admit grants an admission: a shared lock on the root's lock file, then a
// check that the root is not closing. It waits while a teardown holds the
// exclusive lock, up to ctx. It returns an error wrapping [ErrClosing] when
// the root is closing or was removed.
//
// Admissions of one Root share one lock; a process must not take the
// exclusive lock ([Root.LockExclusive]) through a Root while holding an
// admission through it.
func (r *Root) Admit(ctx context.Context) (*Admission, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// A teardown marks the root closing before it takes the exclusive lock:
	// refuse at once rather than wait for a lock that ends in refusal.
	if closing, err := r.closing(); err != nil || closing {
		if err == nil {
			err = errs.Wrapf(ErrClosing, "journal: %s", r.path)
		}
		return nil, err
	}
	if r.sharedN == 0 {
		// Never O_CREAT: the lock file is made by Open, and a missing one
		// means the root was removed.
		fl, err := r.openLock(ctx, lockName, unix.LOCK_SH)
		if err != nil {
			if errors.Is(err, ErrClosing) || errors.Is(err, ErrUnsafeRoot) {
				return nil, err
			}
			return nil, fmt.Errorf("journal: admission to %s: %w", r.path, err)
		}
		r.shared = fl
	}
	closing, err := r.closing()
	if err == nil && closing {
		err = errs.Wrapf(ErrClosing, "journal: %s", r.path)
	}
	if err != nil {
		if r.sharedN == 0 {
			r.shared.Close()
			r.shared = nil
		}
		return nil, err
	}
	r.sharedN++
	return &Admission{r: r}, nil
}

// Done releases the admission.
func (a *Admission) Done() {
	r := a.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if a.done {
		return
	}
	a.done = true
	if r.sharedN == 0 {
		// Root.Close released the lock already.
		return
	}
	if r.sharedN--; r.sharedN == 0 && r.shared != nil {
		r.shared.Close()
		r.shared = nil
	}
}

// Publish publishes rec under this admission; it succeeds even after the
// root started closing, so an admitted creator can record what it created.
func (a *Admission) Publish(rec *Record) error { return a.r.publish(rec) }

func (r *Root) closing() (bool, error) {
	_, err := r.dir.Lstat(closingName)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return !r.linked(), nil
	}
	return false, fmt.Errorf("journal: %w", err)
}

// Closing reports whether teardown has begun (or the root was removed).
func (r *Root) Closing() (bool, error) { return r.closing() }

// MarkClosing makes new admissions fail with [ErrClosing]. It is the first
// step of a teardown, before [Root.LockExclusive]. It is idempotent, and a
// root that another participant removed counts as closing: MarkClosing then
// returns nil and creates nothing.
func (r *Root) MarkClosing() error {
	if !r.linked() {
		return nil
	}
	// Through the root's descriptor with O_NOFOLLOW honoured: os.Root
	// would follow a symlink named closing to whatever file inside the
	// root it names (a record) and overwrite it with the marker.
	shown := filepath.Join(r.path, closingName)
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat(int(r.top.Fd()), closingName, unix.O_CREAT|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
	})
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !r.linked() {
			return nil
		}
		return fmt.Errorf("journal: mark closing: %w", &fs.PathError{Op: "openat", Path: shown, Err: err})
	}
	f := os.NewFile(uintptr(fd), shown)
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return &UnsafeError{shown, "closing marker is not a regular file"}
	}
	// Who marked it, for status (and for a reopen, which waits for the
	// marker's writer to be dead).
	werr := writeMarker(f)
	if errors.Is(werr, syscall.ENOSPC) || errors.Is(werr, syscall.EDQUOT) {
		// A full file system: the marker exists and blocks admissions,
		// it only cannot name its writer (an unnamed marker, as older
		// ones are). Failing here would have the teardown report the
		// admissions unblocked while the marker stays.
		f.Truncate(0)
		werr = nil
	}
	return errors.Join(werr, f.Close(), r.syncDir())
}

// Exclusive is the teardown lock of a root.
type Exclusive struct {
	r  *Root
	fl *fileLock
}

// LockExclusive takes the exclusive lock on the root, waiting up to ctx for
// admitted creators to finish. Call [Root.MarkClosing] first, or new
// admissions can keep it waiting. If the root was removed meanwhile, it
// returns an error wrapping [ErrClosing].
func (r *Root) LockExclusive(ctx context.Context) (*Exclusive, error) {
	r.mu.Lock()
	held := r.sharedN
	r.mu.Unlock()
	if held > 0 {
		return nil, fmt.Errorf("journal: %s: exclusive lock requested while this process holds %d admission(s)", r.path, held)
	}
	fl, err := r.openLock(ctx, lockName, unix.LOCK_EX)
	if err != nil {
		if errors.Is(err, ErrClosing) || errors.Is(err, ErrUnsafeRoot) {
			return nil, err
		}
		return nil, fmt.Errorf("journal: exclusive lock on %s: %w", r.path, err)
	}
	return &Exclusive{r: r, fl: fl}, nil
}

// TryLockExclusive is LockExclusive without waiting: it returns (nil, nil)
// when the lock is busy (an admission or another teardown holds it).
func (r *Root) TryLockExclusive() (*Exclusive, error) {
	r.mu.Lock()
	held := r.sharedN
	r.mu.Unlock()
	if held > 0 {
		return nil, nil
	}
	fl, err := r.openLock(nil, lockName, unix.LOCK_EX)
	if fl == nil || err != nil {
		return nil, err
	}
	return &Exclusive{r: r, fl: fl}, nil
}

// Reopen ends a teardown that keeps the root: it removes the closing marker,
// so that admissions are granted again once the exclusive lock is released.
func (x *Exclusive) Reopen() error {
	if err := x.r.dir.Remove(closingName); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("journal: reopen %s: %w", x.r.path, err)
	}
	return nil
}

// Unlock releases the exclusive lock.
func (x *Exclusive) Unlock() error { return x.fl.Close() }

// Lease is a participant's proof of life: an exclusive flock on
// leases/<pid>-<starttime>-<pidns>-<bootid> (see leaseName), held for as
// long as the process lives. The kernel drops it when the process dies,
// SIGKILL included.
type Lease struct {
	r    *Root
	name string
	fl   *fileLock
}

// leaseWait bounds how long Lease retries a contended lease file.
const leaseWait = 2 * time.Second

// Lease takes (once per Root) the calling process's lease on the root. It is
// released by [Root.Close] or when the process dies.
func (r *Root) Lease() (*Lease, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lease != nil {
		return r.lease, nil
	}
	self, err := owner.Self()
	if err != nil {
		return nil, err
	}
	name, ok := leaseName(self)
	if !ok {
		return nil, fmt.Errorf("journal: lease: boot id %q cannot name a lease file", self.BootID)
	}
	// A recoverer probing the lease (LeaseOf takes a shared lock for an
	// instant) or removing a file it found free just before we locked it
	// can make one attempt fail; the lease is ours by name, so try again
	// for a bounded time.
	ctx, cancel := context.WithTimeout(context.Background(), leaseWait)
	defer cancel()
	var fl *fileLock
	for {
		fl, err = r.newFlock(name, true)
		if errors.Is(err, fs.ErrNotExist) && !r.linked() {
			return nil, errs.Quietf(ErrClosing, "journal: lease on %s: the root was removed", r.path)
		}
		if err != nil {
			return nil, fmt.Errorf("journal: lease: %w", err)
		}
		ok, err := fl.tryContext(ctx, unix.LOCK_EX)
		if err != nil || !ok {
			fl.Close()
			if errors.Is(err, fs.ErrNotExist) && !r.linked() {
				return nil, errs.Quietf(ErrClosing, "journal: lease on %s: the root was removed", r.path)
			}
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				err = errors.New("held by another open file")
			}
			return nil, fmt.Errorf("journal: lease %s: %w", fl.Path(), err)
		}
		err = r.checkLockFile(fl)
		if err == nil {
			break
		}
		fl.Close()
		if !errors.Is(err, ErrClosing) || !r.linked() || ctx.Err() != nil {
			return nil, err
		}
		// The file was unlinked between our open and our lock: retry.
	}
	r.lease = &Lease{r: r, name: name, fl: fl}
	return r.lease, nil
}

// leaseFromBirth takes the lease under an admission: a teardown that removes
// the root needs the exclusive lock, so none can run between the admission
// and the lease, and every later one sees the lease held. It fails with
// [ErrClosing] when the root is closing or was removed before the admission.
func (r *Root) leaseFromBirth() error {
	ctx, cancel := context.WithTimeout(context.Background(), leaseWait)
	defer cancel()
	adm, err := r.Admit(ctx)
	if err != nil {
		return err
	}
	defer adm.Done()
	_, err = r.Lease()
	return err
}

// HoldsLease reports whether the calling process holds its lease through
// this Root (see [Root.Lease]).
func (r *Root) HoldsLease() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lease != nil
}

// ReleaseLease releases the calling process's lease on this root, if it
// holds one (a participant about to remove the root it leased).
func (r *Root) ReleaseLease() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lease == nil {
		return nil
	}
	err := r.lease.release()
	r.lease = nil
	return err
}

// release unlinks the lease file while still holding it, then unlocks.
func (l *Lease) release() error {
	st, err := l.fl.f.Stat()
	if err == nil {
		err = unlinkAt(l.fl.dir, l.fl.name, st, 0)
	}
	return errors.Join(err, l.fl.Close())
}

// LeaseState is what a participant's lease file says about it.
type LeaseState int

const (
	// LeaseNone: no lease file; judge by identity alone.
	LeaseNone LeaseState = iota
	// LeaseHeld: the participant is alive (even in another PID namespace).
	LeaseHeld
	// LeaseFree: the lease file exists but nobody holds it: the
	// participant is dead.
	LeaseFree
)

// LeaseOf reports the state of the lease of the participant id. A
// participant of another boot (or host) has no lease that proves anything
// here: LeaseNone, whatever its file says, so its identity decides.
func (r *Root) LeaseOf(id owner.Identity) (LeaseState, error) {
	if boot, err := owner.BootID(); err != nil || id.BootID != boot {
		return LeaseNone, nil
	}
	name, ok := leaseName(id)
	if !ok {
		return LeaseNone, nil
	}
	fl, err := r.newFlock(name, false)
	if errors.Is(err, fs.ErrNotExist) {
		return LeaseNone, nil
	}
	if err != nil {
		return LeaseNone, fmt.Errorf("journal: lease: %w", err)
	}
	defer fl.Close()
	ok, err = fl.try(unix.LOCK_SH)
	switch {
	case err != nil:
		return LeaseNone, fmt.Errorf("journal: lease: %w", err)
	case !ok:
		return LeaseHeld, nil
	}
	if err := r.checkLockFile(fl); err != nil {
		return LeaseNone, err
	}
	return LeaseFree, nil
}

// removeFreeLease unlinks a lease file only while holding its lock, so a
// live participant's lease is never removed.
func (r *Root) removeFreeLease(name string) (removed bool, err error) {
	fl, err := r.newFlock(leasesDir+"/"+name, false)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer fl.Close()
	ok, err := fl.try(unix.LOCK_EX)
	if err != nil || !ok {
		return false, err
	}
	st, err := fl.f.Stat()
	if err == nil {
		err = unlinkAt(fl.dir, fl.name, st, 0)
	}
	if err != nil {
		return false, fmt.Errorf("journal: %w", err)
	}
	return true, nil
}
