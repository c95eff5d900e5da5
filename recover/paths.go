package recover

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/ownerjournal/ownerjournal/journal"
)

func depth(p string) int { return strings.Count(p, "/") }

// removeTree removes p inside dir deepest first without following
// symlinks (a symlink is removed itself, never its target), attempting every
// entry and collecting every error. ENOENT is progress.
func removeTree(dir *os.Root, p string) error {
	if err := journal.CheckLocal(p); err != nil {
		return err
	}
	var errs []error
	var walk func(p string)
	walk = func(p string) {
		fi, err := dir.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return
		}
		if err != nil {
			errs = append(errs, err)
			return
		}
		if fi.IsDir() {
			d, err := dir.Open(p)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
				return
			}
			if err == nil {
				names, err := d.Readdirnames(-1)
				d.Close()
				// ENOENT: another recoverer removed the directory after
				// it was opened; progress, not failure (invariant 10).
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, err)
				}
				for _, n := range names {
					walk(path.Join(p, n))
				}
			}
		}
		if err := dir.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	walk(p)
	if len(errs) > 0 {
		return fmt.Errorf("remove %s: %w", p, errors.Join(errs...))
	}
	return nil
}
