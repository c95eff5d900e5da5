package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ownerjournal/ownerjournal/internal/errs"
	"github.com/ownerjournal/ownerjournal/owner"
)

// ClosingInfo describes a root whose teardown has begun: since when, and
// which process marked it (nil when the marker names nobody, as markers
// written before it recorded its writer do).
type ClosingInfo struct {
	Since time.Time
	By    *owner.Identity
}

// maxMarker bounds what is read of the closing marker.
const maxMarker = 4096

// Closing returns the root's closing marker, or nil when the root is not
// closing. It changes nothing.
func (r *Root) ClosingInfo() (*ClosingInfo, error) {
	f, err := openNoFollow(r.top, closingName)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: closing marker of %s: %w", r.path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("journal: closing marker of %s: %w", r.path, err)
	}
	info := &ClosingInfo{Since: fi.ModTime()}
	if !fi.Mode().IsRegular() {
		return info, nil
	}
	b, _ := io.ReadAll(io.LimitReader(f, maxMarker))
	var id owner.Identity
	if json.Unmarshal(b, &id) == nil && id.PID > 0 {
		info.By = &id
	}
	return info, nil
}

// writeMarker writes the identity of the process marking the root closing
// into the marker it has open.
func writeMarker(f *os.File) error {
	self, err := owner.Self()
	if err != nil {
		return err
	}
	b, err := json.Marshal(self)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("journal: mark closing: %w", err)
	}
	if _, err := f.WriteAt(append(b, '\n'), 0); err != nil {
		return fmt.Errorf("journal: mark closing: %w", err)
	}
	return nil
}

// ReopenIfAbandoned ends a teardown whose recoverer is verified dead: it
// takes the exclusive lock without waiting and removes the closing marker,
// so that admissions are granted again. It refuses (an error wrapping
// [ErrClosing]) while the recoverer that marked the root lives or cannot be
// verified, or while the lock is held (a teardown or an admission in
// progress). A root that is not closing is left alone.
func (r *Root) ReopenIfAbandoned() error {
	if err := r.markerAbandoned(); err != nil {
		return err
	}
	x, err := r.TryLockExclusive()
	if err != nil {
		return err
	}
	if x == nil {
		return errs.Quietf(ErrClosing, "journal: %s is closing: its lock is held (a teardown or an admitted creator is at work)", r.path)
	}
	defer x.Unlock()
	// Again under the lock: a recoverer that marked the root meanwhile
	// waits for this lock, and its marker must stay.
	if err := r.markerAbandoned(); err != nil {
		return err
	}
	return x.Reopen()
}

// markerAbandoned returns nil when the closing marker's writer is verified
// dead (or unnamed), and an error wrapping ErrClosing otherwise.
func (r *Root) markerAbandoned() error {
	info, err := r.ClosingInfo()
	if err != nil || info == nil || info.By == nil {
		return err
	}
	if v := owner.Check(*info.By); v.State != owner.Dead {
		return errs.Quietf(ErrClosing, "journal: %s is closing: the recoverer that marked it (pid %d) is %s; let it finish", r.path, info.By.PID, v.State)
	}
	return nil
}

// CorruptFile is a record file a scan did not believe, read for a person to
// judge before [Root.RemoveCorrupt] removes it.
type CorruptFile struct {
	Name   string // the file's name inside records/
	Path   string
	Reason string
	Text   []byte // its content (at most MaxRecordSize bytes); empty unless a regular file
	Type   fs.FileMode
	info   fs.FileInfo
}

// ReadCorrupt returns the corrupt record file name (a single file name inside
// records/, never a pattern). It returns an error wrapping [ErrNotFound] when
// no such file exists and one wrapping [ErrBadName] when the name is not a
// single name or the file is a record that a scan believes.
func (r *Root) ReadCorrupt(name string) (*CorruptFile, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return nil, errs.Wrapf(ErrBadName, "journal: %q is not a file name inside records/", name)
	}
	s, err := r.Scan()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(r.path, recordsDir, name)
	var ce *CorruptError
	for _, c := range s.Corrupt {
		if c.Path == path {
			ce = c
		}
	}
	if ce == nil {
		if _, err := r.records.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			return nil, errs.Wrapf(ErrNotFound, "journal: %s", path)
		}
		return nil, errs.Quietf(ErrBadName, "journal: %s is not a corrupt record (retire a record by its id)", path)
	}
	fi, err := r.records.Lstat(name)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	cf := &CorruptFile{Name: name, Path: path, Reason: ce.Reason, Type: fi.Mode().Type(), info: fi}
	if fi.Mode().IsRegular() {
		f, err := openNoFollow(r.recDir, name)
		if err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		defer f.Close()
		ffi, err := f.Stat()
		if err != nil || !os.SameFile(ffi, fi) {
			return nil, errs.Quietf(ErrBadName, "journal: %s changed while being read", path)
		}
		if cf.Text, err = io.ReadAll(io.LimitReader(f, MaxRecordSize)); err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
	}
	return cf, nil
}

// RemoveCorrupt removes the file cf describes, only if its name still
// refers to the same file (a directory is never removed: it may hold
// anything).
func (r *Root) RemoveCorrupt(cf *CorruptFile) error {
	fi, err := r.records.Lstat(cf.Name)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if !os.SameFile(fi, cf.info) {
		return errs.Quietf(ErrBadName, "journal: %s changed since it was read", cf.Path)
	}
	if fi.IsDir() {
		return errs.Quietf(ErrBadName, "journal: %s is a directory: look inside and remove it yourself", cf.Path)
	}
	if err := r.records.Remove(cf.Name); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return r.syncDir()
}
