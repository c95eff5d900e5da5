package recover

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"time"

	"github.com/ownerjournal/ownerjournal/internal/cgroup"
)

// ownGroupRE is the name `ownerjournal run` gives its cgroups. A record
// naming any other cgroup is not acted on: a mistaken path must never make
// recovery kill a system service's group.
var ownGroupRE = regexp.MustCompile(`^oj-[0-9]+-[0-9a-f]{16}$`)

// endCgroup kills every member of a recorded cgroup at once (cgroup.kill),
// waits until it is empty, and removes it. A group already gone is progress.
// It acts only on the group that was recorded: one whose cgroup id is id,
// in a base this user may create groups in; a group recorded without its id
// (a version 1 record) or replaced since is left alone and retained.
func endCgroup(ctx context.Context, path string, id uint64, grace time.Duration) (string, error) {
	if !ownGroupRE.MatchString(filepath.Base(path)) {
		return "", fmt.Errorf("cgroup %s is not one ownerjournal created, left alone", path)
	}
	if id == 0 {
		g, err := cgroup.OpenGroup(path)
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		if err == nil {
			g.Close()
		}
		return "", fmt.Errorf("cgroup %s was recorded without its id, so it cannot be told from another group of that name: left alone", path)
	}
	g, err := cgroup.OpenRecorded(path, id)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("cgroup %s left alone: %w", path, err)
	}
	defer g.Close()
	t0 := time.Now()
	kctx, cancel := context.WithTimeout(ctx, 2*grace)
	defer cancel()
	if err := g.Kill(kctx); err != nil {
		return "", fmt.Errorf("cgroup %s: %w", path, err)
	}
	if err := g.Remove(); err != nil {
		return "", fmt.Errorf("cgroup %s: %w", path, err)
	}
	return fmt.Sprintf("cgroup.kill on %s: empty after %v, removed", path, time.Since(t0).Round(time.Millisecond)), nil
}
