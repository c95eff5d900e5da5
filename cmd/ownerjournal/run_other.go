//go:build !linux

package main

import "syscall"

// becomeSupervisor: there is no subreaper or parent-death signal here; the
// supervisor still owns CMD's process group and ends it.
func becomeSupervisor() error { return nil }

func childAttr(*containment) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// descendants is not available without procfs; CMD's group is still ended
// through the group leader.
func descendants(int) ([]int, error) { return nil, nil }

func reapIfChild(int) {}
