//go:build !linux

package owner

import "fmt"

// selfPIDNS is zero where there are no PID namespaces: identities carry
// none, and PIDs are read as they are.
func selfPIDNS() (uint64, error) { return 0, nil }

// checkForeign judges an identity recorded in a Linux PID namespace: this
// system cannot see one.
func checkForeign(id Identity, _ uint64) (Verdict, procInfo) {
	return Verdict{Unknown, fmt.Sprintf("pid %d was recorded in PID namespace %d; this system has none", id.PID, id.PIDNS)}, procInfo{}
}

func groupAliveForeign(ns uint64, pgid int, _ uint64) (bool, error) {
	return false, fmt.Errorf("owner: process group %d was recorded in PID namespace %d; this system has none: %w", pgid, ns, ErrUnverifiable)
}

// liveElsewhere: without PID namespaces there is nowhere else.
func liveElsewhere(int, uint64) (bool, error) { return false, nil }
