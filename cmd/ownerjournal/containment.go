package main

import (
	"context"
	"time"

	"github.com/ownerjournal/ownerjournal/owner"
)

// containment is CMD's cgroup, when run may create one. The zero value is
// "no cgroup".
type containment struct{}

func newContainment(mode string, self owner.Identity) (containment, error) {
	return containment{}, nil
}

func (containment) path() string                                        { return "" }
func (containment) fd() (int, bool)                                     { return 0, false }
func (containment) kill(ctx context.Context, grace time.Duration) error { return nil }
func (containment) remove()                                             {}
