//go:build !linux

package cgroup

import (
	"context"
	"errors"
	"fmt"
)

// errNoCgroups is wrapped by everything on systems without cgroups.
var errNoCgroups = fmt.Errorf("%w: cgroups exist only on Linux: %w", ErrUnavailable, errors.ErrUnsupported)

func detect() (Hierarchy, error) { return Hierarchy{}, errNoCgroups }

func (Hierarchy) create(string) (*Group, error) { return nil, errNoCgroups }

func openGroup(string) (*Group, error) { return nil, errNoCgroups }

func openRecorded(string, uint64) (*Group, error) { return nil, errNoCgroups }

func (*Group) id() (uint64, error) { return 0, errNoCgroups }

func (*Group) kill(context.Context) error { return errNoCgroups }
func (*Group) remove() error              { return errNoCgroups }
func (*Group) procs() ([]int, error)      { return nil, errNoCgroups }
func (*Group) populated() (bool, error)   { return false, errNoCgroups }
func (*Group) close() error               { return nil }
