package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ownerjournal/ownerjournal/internal/cgroup"
)

// containment is CMD's cgroup, when run may create one. The zero value is
// "no cgroup": the subreaper and the journal do the work then.
type containment struct {
	h       cgroup.Hierarchy
	name    string // the planned group's name; empty without a cgroup
	planned string // its path: recorded before the group is created
	g       *cgroup.Group
	id      uint64 // the group's cgroup id, once created
	// why says why there is no cgroup (mode off, or unavailable).
	why string
}

// newContainment plans CMD's cgroup as --cgroup says: auto uses one when
// the kernel and permissions allow it, require fails when it cannot, off
// never does. Nothing is created yet: the path goes into the intent record
// first (a supervisor killed between the two leaves a record naming a group
// that does not exist, which recovery counts as progress, never a group no
// record names).
func newContainment(mode string) (*containment, error) {
	if mode == "off" {
		return &containment{why: "cgroup off (--cgroup=off)"}, nil
	}
	h, err := cgroup.Detect()
	if err != nil {
		if mode == "require" {
			return nil, fmt.Errorf("--cgroup=require cannot be honoured: %w", err)
		}
		return &containment{why: "no cgroup: " + err.Error()}, nil
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	name := "oj-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(rnd[:])
	return &containment{h: h, name: name, planned: filepath.Join(h.Parent, name)}, nil
}

// create makes the planned group. In auto mode a failure falls back to no
// cgroup (path and why change accordingly); in require mode it is an error.
func (c *containment) create(mode string) error {
	if c.name == "" {
		return nil
	}
	g, err := c.h.Create(c.name)
	if err == nil {
		if c.id, err = g.ID(); err != nil {
			g.Remove()
			g.Close()
		}
	}
	if err != nil {
		c.name, c.planned = "", ""
		if mode == "require" {
			return fmt.Errorf("--cgroup=require cannot be honoured: %w", err)
		}
		c.why = "no cgroup: " + err.Error()
		return nil
	}
	c.g = g
	return nil
}

func (c *containment) path() string { return c.planned }

func (c *containment) fd() (int, bool) {
	if c.g == nil {
		return 0, false
	}
	return c.g.FD(), true
}

// kill ends every member at once (cgroup.kill) and waits for the group to
// be empty, up to twice the grace period.
func (c *containment) kill(ctx context.Context, grace time.Duration) error {
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

// empty reports whether the group has no member left (cgroup.events
// populated 0); without a group there is nothing to be populated.
func (c *containment) empty() (bool, error) {
	if c.g == nil {
		return true, nil
	}
	populated, err := c.g.Populated()
	return !populated, err
}

func (c *containment) remove() error {
	if c.g == nil {
		return nil
	}
	err := c.g.Remove()
	c.g.Close()
	return err
}
