package benchkit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/google/renameio/v2"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// PrivateDir makes a short, empty directory of mode 0700 under the system
// temp directory: short enough for a root (≤ 82 bytes).
func PrivateDir() (string, error) {
	d, err := os.MkdirTemp("", "ojb")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(d, 0o700); err != nil {
		os.RemoveAll(d)
		return "", err
	}
	return d, nil
}

// NewRoot makes a private directory and opens it as a root.
func NewRoot() (*journal.Root, error) {
	d, err := PrivateDir()
	if err != nil {
		return nil, err
	}
	r, err := journal.Open(d)
	if err != nil {
		os.RemoveAll(d)
		return nil, err
	}
	return r, nil
}

// Sleeper is a real `sleep` process started by this process.
type Sleeper struct {
	Cmd *exec.Cmd
	ID  owner.Identity
	// Exited is closed once the process was reaped.
	Exited chan struct{}
}

// StartSleeper starts `sleep 1000`, in a process group of its own when
// group is set, and reads its identity. A goroutine reaps it.
func StartSleeper(group bool) (*Sleeper, error) {
	cmd := exec.Command("sleep", "1000")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: group}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start sleep: %w", err)
	}
	s := &Sleeper{Cmd: cmd, Exited: make(chan struct{})}
	go func() { cmd.Wait(); close(s.Exited) }()
	id, err := owner.Of(cmd.Process.Pid)
	if err != nil {
		cmd.Process.Kill()
		return nil, err
	}
	s.ID = id
	return s, nil
}

// Kill ends the sleeper (SIGKILL) and waits until it is reaped.
func (s *Sleeper) Kill() {
	s.Cmd.Process.Kill()
	<-s.Exited
}

// DeadIdentity returns the identity of a process that has exited and been
// reaped: a verified-dead owner for fixtures.
func DeadIdentity() (owner.Identity, error) {
	s, err := StartSleeper(false)
	if err != nil {
		return owner.Identity{}, err
	}
	s.Kill()
	return s.ID, nil
}

// Record returns a realistic process record: a labelled subject leading its
// own process group, owned by ownerID. Its ID is fresh.
func Record(ownerID, subject owner.Identity, i int) *journal.Record {
	subj := subject
	return &journal.Record{
		Version: journal.SchemaVersion,
		ID:      journal.NewID(ownerID),
		Kind:    journal.KindProcess,
		Label:   "e2e-server worker " + strconv.Itoa(i),
		Subject: &subj,
		Owner:   ownerID,
		PGID:    subj.PID,
		Phase:   journal.PhaseLive,
		Created: time.Now().UTC().Truncate(time.Millisecond),
	}
}

// WriteRecords writes records straight into root's records/ directory
// without fsync (fixtures are not what is measured). It returns the file
// names in the order of recs.
func WriteRecords(rootPath string, recs []*journal.Record) ([]string, error) {
	names := make([]string, len(recs))
	for i, rec := range recs {
		b, err := rec.Encode()
		if err != nil {
			return nil, err
		}
		names[i] = rec.ID + ".json"
		if err := os.WriteFile(filepath.Join(rootPath, "records", names[i]), b, 0o600); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// FloorPublish is the least a durable atomic write needs: renameio.WriteFile
// of b to dir/name with its temp file in dir (fsync of the file, rename),
// then an fsync of dir through the already open d.
func FloorPublish(dir string, d *os.File, name string, b []byte) error {
	if err := renameio.WriteFile(filepath.Join(dir, name), b, 0o600, renameio.WithTempDir(dir)); err != nil {
		return err
	}
	return d.Sync()
}

// FloorScan is the least a scan-and-classify of a records directory needs:
// list it, read every file, and read one /proc/PID/stat per file (stat maps
// a file name to the PID whose stat it reads). It returns the number of
// files read.
func FloorScan(dir string, stat map[string]int) (int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if _, err := os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
			return n, err
		}
		pid, ok := stat[e.Name()]
		if !ok {
			return n, fmt.Errorf("no pid for %s", e.Name())
		}
		// A dead PID's stat is ENOENT: that is a read too.
		if _, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, err
		}
		n++
	}
	return n, nil
}

// FloorRecover is the least a recovery of stale records needs: read and
// unlink every file of records/, then remove the root's entries and the
// root itself. It returns the number of records removed.
func FloorRecover(rootPath string) (int, error) {
	dir := filepath.Join(rootPath, "records")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if _, err := os.ReadFile(p); err != nil {
			return n, err
		}
		if err := os.Remove(p); err != nil {
			return n, err
		}
		n++
	}
	for _, p := range []string{dir, filepath.Join(rootPath, "leases"), filepath.Join(rootPath, "lock"), rootPath} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, err
		}
	}
	return n, nil
}

// Median returns the median of ds (0 for none). It sorts ds.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	if n := len(ds); n%2 == 0 {
		return (ds[n/2-1] + ds[n/2]) / 2
	}
	return ds[len(ds)/2]
}

// Quantile returns the q-quantile (0..1) of ds, nearest rank. It sorts ds.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	i := int(q*float64(len(ds)-1) + 0.5)
	return ds[i]
}
