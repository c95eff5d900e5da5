package journal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/renameio/v2"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/errs"
	"github.com/ownerjournal/ownerjournal/owner"
)

var selfOnce = sync.OnceValues(owner.Self)

// Publish publishes rec atomically inside a short admission; it fails with
// [ErrClosing] once teardown has begun (use [Admission.Publish] to record
// what an admitted creator made). An empty ID is filled in with [NewID] of
// the calling process; Version and Created are filled in too. Publishing a
// record with an existing ID replaces it atomically (intent → live).
func (r *Root) Publish(ctx context.Context, rec *Record) error {
	adm, err := r.Admit(ctx)
	if err != nil {
		return err
	}
	defer adm.Done()
	return adm.Publish(rec)
}

func (r *Root) publish(rec *Record) error {
	if rec.ID == "" {
		self, err := selfOnce()
		if err != nil {
			return err
		}
		rec.ID = NewID(self)
	}
	rec.Version = SchemaVersion
	if rec.Created.IsZero() {
		rec.Created = time.Now().UTC().Truncate(time.Millisecond)
	}
	b, err := rec.Encode()
	if err != nil {
		return err
	}
	// renameio: write a temp file in records/, fsync it, rename it over
	// the final name. The temp name is "."+final+random, so a writer that
	// dies here leaves a temp file that names it. The mode is exactly 0600
	// (not renameio.WriteFile's copy of an existing file's mode, which would
	// carry a group-writable record's mode over to its replacement).
	t, err := renameio.NewPendingFile(rec.ID+".json", renameio.WithRoot(r.records), renameio.WithPermissions(0o600), renameio.WithStaticPermissions(0o600))
	if err != nil {
		return fmt.Errorf("journal: publish %s: %w", rec.ID, err)
	}
	defer t.Cleanup()
	if _, err := t.Write(b); err != nil {
		return fmt.Errorf("journal: publish %s: %w", rec.ID, err)
	}
	publishHook("written")
	if err := t.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("journal: publish %s: %w", rec.ID, err)
	}
	publishHook("renamed")
	// fsync records/ so that the rename itself survives a crash; renameio
	// stops at the rename.
	if err := r.syncDir(); err != nil {
		return err
	}
	publishHook("synced")
	return nil
}

// Test seams: publishHook is called at each step of a publish ("written":
// the temp file holds the record; "renamed": the record is under its final
// name; "synced": records/ is fsynced); scanHook is called for each
// record file name after records/ was listed ("listed") and after the file
// was opened ("opened").
// removeRootHook is called by RemoveRoot once the tombstone is emptied,
// before it is removed.
var (
	publishHook    = func(step string) {}
	scanHook       = func(step, name string) {}
	removeRootHook = func() {}
)

func (r *Root) syncDir() error {
	if err := r.recDir.Sync(); err != nil {
		return fmt.Errorf("journal: fsync %s: %w", filepath.Join(r.path, recordsDir), err)
	}
	return nil
}

// Retire removes the record id. It returns an error wrapping [ErrNotFound]
// when no such record exists (another participant may have retired it).
//
// The unlink is deliberately not fsynced: a retire lost in a crash only
// brings back a record whose subject is gone, and replaying that is harmless
// (recovery verifies the subject dead and retires it again).
func (r *Root) Retire(id string) error {
	if !ValidID(id) {
		return errs.Wrapf(ErrBadName, "journal: record id %q", id)
	}
	if err := r.records.Remove(id + ".json"); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return errs.Wrapf(ErrNotFound, "journal: record %s", id)
		}
		return fmt.Errorf("journal: retire %s: %w", id, err)
	}
	return nil
}

// CorruptError reports a record file that is not believed, with its path and
// the reason. It wraps [ErrCorrupt].
type CorruptError struct {
	Path   string
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("journal: corrupt record %s: %s", e.Path, e.Reason)
}
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// TempFile is a temp file left in records/ by a publish that has not (yet)
// renamed it. Writer carries the writer's PID and start time only.
type TempFile struct {
	Name   string
	Writer owner.Identity
}

// LeaseFile is a participant's lease file.
type LeaseFile struct {
	Name string
	// Participant has the PID, start time, PID namespace and boot id of
	// the lease's holder (an empty boot id: a lease named before leases
	// carried it).
	Participant owner.Identity
}

// Scan is a snapshot of a root's journal.
type Scan struct {
	Records []*Record
	Corrupt []*CorruptError
	Temps   []TempFile
	Leases  []LeaseFile
	// Extra lists the root's top-level entries that are not the journal's
	// own (sockets, scratch paths, anything else).
	Extra []string
}

var tempRE = regexp.MustCompile(`^\.([0-9]{1,10}-[0-9]{1,20}-[0-9a-f]{8})\.json[0-9]+$`)

// Scan reads every record, checking each file before believing it: a
// regular file (not a symlink, FIFO, directory or hard link), owned by the
// effective UID, not group- or world-writable, at most [MaxRecordSize]
// bytes, decoding strictly. Records that vanish mid-scan (retired by
// another participant) are skipped: ENOENT is progress. Records are sorted
// by id.
func (r *Root) Scan() (*Scan, error) {
	s := &Scan{}
	// A descriptor of records/ of this scan's own: a shared one would share
	// its directory offset with concurrent scans.
	d, err := ownDirOf(r.recDir, filepath.Join(r.path, recordsDir))
	if err != nil {
		return nil, fmt.Errorf("journal: scan %s: %w", r.path, err)
	}
	defer d.Close()
	euid := geteuid()
	ents, err := readDirNames(d)
	if err != nil {
		return nil, fmt.Errorf("journal: scan %s: %w", r.path, err)
	}
	for _, e := range ents {
		name := e.Name()
		path := filepath.Join(r.path, recordsDir, name)
		if m := tempRE.FindStringSubmatch(name); m != nil && e.Type().IsRegular() {
			pid, start, _ := writerOf(m[1])
			s.Temps = append(s.Temps, TempFile{Name: name, Writer: owner.Identity{PID: pid, StartTime: start}})
			continue
		}
		id, ok := strings.CutSuffix(name, ".json")
		if !ok || !ValidID(id) {
			s.Corrupt = append(s.Corrupt, &CorruptError{path, "unexpected entry in records/"})
			continue
		}
		scanHook("listed", name)
		rec, reason, gone := readRecord(d, name, e.Type(), euid)
		switch {
		case gone:
		case reason != "":
			s.Corrupt = append(s.Corrupt, &CorruptError{path, reason})
		case rec.ID != id:
			s.Corrupt = append(s.Corrupt, &CorruptError{path, fmt.Sprintf("file name does not match record id %q", rec.ID)})
		default:
			s.Records = append(s.Records, rec)
		}
	}
	sort.Slice(s.Records, func(i, j int) bool { return s.Records[i].ID < s.Records[j].ID })
	if err := r.scanLeases(s); err != nil {
		return nil, err
	}
	top, err := ownDirOf(r.top, r.path)
	if err != nil {
		return nil, fmt.Errorf("journal: scan %s: %w", r.path, err)
	}
	defer top.Close()
	tents, err := readDirNames(top)
	if err != nil {
		return nil, fmt.Errorf("journal: scan %s: %w", r.path, err)
	}
	for _, e := range tents {
		if n := e.Name(); !reserved(n) {
			s.Extra = append(s.Extra, n)
		}
	}
	return s, nil
}

func (r *Root) scanLeases(s *Scan) error {
	d, err := r.openDir(leasesDir)
	if err != nil {
		return fmt.Errorf("journal: scan %s: %w", r.path, err)
	}
	defer d.Close()
	ents, err := readDirNames(d)
	if err != nil {
		return fmt.Errorf("journal: scan %s: %w", r.path, err)
	}
	for _, e := range ents {
		id, ok := parseLeaseName(e.Name())
		if !ok {
			s.Extra = append(s.Extra, leasesDir+"/"+e.Name())
			continue
		}
		s.Leases = append(s.Leases, LeaseFile{Name: e.Name(), Participant: id})
	}
	return nil
}

// readDirNames lists a directory from its start; d_type comes from
// getdents, so no entry is stat'ed here.
func readDirNames(d *os.File) ([]fs.DirEntry, error) {
	if _, err := d.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return d.ReadDir(-1)
}

// readRecord opens and checks one record file of directory d. gone reports
// ENOENT (retired meanwhile); a non-empty reason reports a corrupt record.
func readRecord(d *os.File, name string, typ fs.FileMode, euid int) (rec *Record, reason string, gone bool) {
	switch {
	case typ&fs.ModeSymlink != 0:
		return nil, "is a symlink", false
	case typ.IsDir():
		return nil, "is a directory", false
	case typ&fs.ModeNamedPipe != 0:
		return nil, "is a FIFO", false
	case !typ.IsRegular() && typ&fs.ModeType != 0:
		return nil, "is not a regular file (" + typ.String() + ")", false
	}
	// openat(2) on the directory descriptor itself: os.Root would follow a
	// symlink that stays inside records/ ([readRecordFile]).
	var b []byte
	if err := withFd(d, func(dfd int) { b, reason, gone = readRecordFile(dfd, d.Name(), name, euid) }); err != nil {
		return nil, "cannot open: " + err.Error(), false
	}
	if reason != "" || gone {
		return nil, reason, gone
	}
	rec, err := Decode(b)
	if err != nil {
		return nil, err.Error(), false
	}
	return rec, "", false
}

// openNoFollow opens name in directory d read-only with O_NOFOLLOW and
// O_NONBLOCK.
func openNoFollow(d *os.File, name string) (*os.File, error) {
	rc, err := d.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var oerr error
	if err := rc.Control(func(dfd uintptr) {
		for {
			fd, oerr = unix.Openat(int(dfd), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if oerr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return nil, err
	}
	if oerr != nil {
		return nil, &fs.PathError{Op: "openat", Path: filepath.Join(d.Name(), name), Err: oerr}
	}
	return os.NewFile(uintptr(fd), filepath.Join(d.Name(), name)), nil
}

// RemoveTemp removes a temp file reported by Scan. The caller must have
// verified that its writer is dead. ENOENT is progress.
func (r *Root) RemoveTemp(t TempFile) error {
	if !tempRE.MatchString(t.Name) {
		return errs.Wrapf(ErrBadName, "journal: temp file %q", t.Name)
	}
	if err := r.records.Remove(t.Name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// RemoveFreeLease removes a lease file whose participant is dead; it takes
// the lease's lock first, so a live participant's lease is never removed
// (removed is false then).
func (r *Root) RemoveFreeLease(l LeaseFile) (removed bool, err error) {
	return r.removeFreeLease(l.Name)
}

// RemoveRoot removes the root, only under the exclusive lock: it refuses
// (an error wrapping [ErrInUse]) while any record, temp file, held lease or
// entry the journal does not own remains. The root is first renamed to a
// hidden tombstone next to it, so that no path-based opener can reach it any
// more, then emptied and removed. If another recoverer already removed the
// root, it returns nil.
func (x *Exclusive) RemoveRoot() error {
	r := x.r
	if !r.linked() {
		return nil
	}
	s, err := r.Scan()
	if err != nil {
		return err
	}
	var live []int
	for _, l := range s.Leases {
		removed, err := r.removeFreeLease(l.Name)
		if err != nil || !removed {
			live = append(live, l.Participant.PID)
		}
	}
	if left := leftSummary(s, live); left != "" {
		return errs.Wrapf(ErrInUse, "journal: keeping %s: %s", r.path, left)
	}
	// The tombstone rename and the final rmdir go through the parent's
	// descriptor from the walk that opened the root, never through its
	// path: a directory renamed or swapped on the way since cannot
	// redirect them.
	if !r.linked() {
		return nil
	}
	base := r.base
	var rnd [4]byte
	rand.Read(rnd[:])
	tomb := "." + base + ".removing-" + hex.EncodeToString(rnd[:])
	if err := renameAt(r.parent, base, tomb); err != nil {
		return fmt.Errorf("journal: remove %s: %w", r.path, err)
	}
	if st, err := statAt(r.parent, tomb); err != nil || !sameInode(st, r.dirInfo) {
		// Renamed something else (the root was swapped after the
		// check): put it back and keep it.
		return errors.Join(fmt.Errorf("journal: remove %s: the entry changed during removal; left in place: %w", r.path, ErrInUse), renameAt(r.parent, tomb, base))
	}
	// Deepest first, every error collected.
	var errs []error
	for _, n := range []string{leasesDir, recordsDir, closingName, lockName} {
		if err := r.dir.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	removeRootHook()
	// A participant that opened the root just before the rename (Open
	// creates lock, records/ and leases/; MarkClosing creates closing) may
	// recreate the journal's own entries in the tombstone: remove them
	// again. rmdir leaves a non-empty directory alone, so anything else
	// stays, and the error is reported.
	for i := 0; ; i++ {
		err := unlinkAt(r.parent, tomb, r.dirInfo, unix.AT_REMOVEDIR)
		if err == nil {
			break
		}
		if i == 3 || !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
			errs = append(errs, err)
			break
		}
		for _, n := range []string{leasesDir, recordsDir, closingName, lockName} {
			// The journal's own: an empty lock file, a closing marker
			// (which names its writer since markers record it).
			if fi, lerr := r.dir.Lstat(n); lerr == nil && (fi.IsDir() || fi.Mode().IsRegular() && (fi.Size() == 0 || n == closingName && fi.Size() <= maxMarker)) {
				r.dir.Remove(n)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("journal: remove %s (now %s): %w", r.path, filepath.Join(filepath.Dir(r.path), tomb), errors.Join(errs...))
	}
	return nil
}
