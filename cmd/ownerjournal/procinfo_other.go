//go:build !linux

package main

import (
	"time"

	"github.com/ownerjournal/ownerjournal/owner"
)

// procCommand is not implemented here: status shows the PID alone.
func procCommand(owner.Identity) (string, bool) { return "", false }

// procAge is not implemented here.
func procAge(owner.Identity) (time.Duration, bool) { return 0, false }
