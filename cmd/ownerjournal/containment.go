package main

import (
	"context"
	"fmt"
	"time"

	"github.com/ownerjournal/ownerjournal/internal/cgroup"
)

// containment is CMD's cgroup, when run may create one. The zero value is
// "no cgroup": the subreaper and the journal do the work then.
type containment struct {
	g *cgroup.Group
	// why says why there is no cgroup (mode off, or unavailable).
	why string
}

// newContainment creates CMD's cgroup as --cgroup says: auto uses one when
// the kernel and permissions allow it, require fails when it cannot, off
// never does.
func newContainment(mode string) (containment, error) {
	if mode == "off" {
		return containment{why: "cgroup off (--cgroup=off)"}, nil
	}
	h, err := cgroup.Detect()
	if err == nil {
		var g *cgroup.Group
		if g, err = h.Create(""); err == nil {
			return containment{g: g}, nil
		}
	}
	if mode == "require" {
		return containment{}, fmt.Errorf("--cgroup=require cannot be honoured: %w", err)
	}
	return containment{why: "no cgroup: " + err.Error()}, nil
}

func (c containment) path() string {
	if c.g == nil {
		return ""
	}
	return c.g.Path()
}

func (c containment) fd() (int, bool) {
	if c.g == nil {
		return 0, false
	}
	return c.g.FD(), true
}

// kill ends every member at once (cgroup.kill) and waits for the group to
// be empty, up to twice the grace period.
func (c containment) kill(ctx context.Context, grace time.Duration) error {
	if c.g == nil {
		return nil
	}
	// Usually the graceful round has ended every member already: then
	// there is nothing to kill, and cgroup.kill, which waits for the
	// kernel's global cgroup mutex (milliseconds on a busy machine), is
	// skipped. Nothing can enter an empty cgroup but by migration.
	if populated, err := c.g.Populated(); err == nil && !populated {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*grace)
	defer cancel()
	return c.g.Kill(ctx)
}

func (c containment) remove() error {
	if c.g == nil {
		return nil
	}
	err := c.g.Remove()
	c.g.Close()
	return err
}
