package journal

import (
	"strconv"
	"strings"

	"github.com/ownerjournal/ownerjournal/owner"
)

// leaseName is a participant's lease file relative to the root:
// leases/<pid>-<starttime>-<pidns>-<bootid>. The boot id keeps a lease of an
// earlier boot (a root on a persistent filesystem) from ever being taken
// for a current participant's, whose PID and start time can repeat after a
// reboot; the PID namespace keeps two participants apart that share a root
// from containers of their own (same PID, same clock tick). ok is false
// for an identity whose boot id cannot be part of a file name.
func leaseName(id owner.Identity) (name string, ok bool) {
	if !validBootID(id.BootID) {
		return "", false
	}
	return leasesDir + "/" + strconv.Itoa(id.PID) + "-" + strconv.FormatUint(id.StartTime, 10) + "-" +
		strconv.FormatUint(id.PIDNS, 10) + "-" + id.BootID, true
}

// parseLeaseName parses the name of a file in leases/ back into the
// participant's PID, start time, PID namespace and boot id. A name of the
// form version 1 wrote, <pid>-<starttime>, parses with an empty boot id: it
// is a lease of a participant from before leases named their boot, which
// proves nothing about anyone now and is only removed once free.
func parseLeaseName(name string) (id owner.Identity, ok bool) {
	parts := strings.SplitN(name, "-", 4)
	if len(parts) != 2 && len(parts) != 4 {
		return id, false
	}
	pid, err1 := strconv.Atoi(parts[0])
	start, err2 := strconv.ParseUint(parts[1], 10, 64)
	// Only the canonical form leaseName writes: "01" names no lease.
	if err1 != nil || err2 != nil || pid <= 0 || parts[0] != strconv.Itoa(pid) || parts[1] != strconv.FormatUint(start, 10) {
		return id, false
	}
	id.PID, id.StartTime = pid, start
	if len(parts) == 2 {
		return id, true
	}
	ns, err := strconv.ParseUint(parts[2], 10, 64)
	if err != nil || parts[2] != strconv.FormatUint(ns, 10) || !validBootID(parts[3]) {
		return owner.Identity{}, false
	}
	id.PIDNS, id.BootID = ns, parts[3]
	return id, true
}

// validBootID accepts what Linux (a UUID in lowercase hex) and darwin
// (kern.bootsessionuuid, uppercase) report: 1 to 64 ASCII letters, digits
// and dashes.
func validBootID(s string) bool {
	const ok = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-"
	return len(s) >= 1 && len(s) <= 64 && strings.Trim(s, ok) == ""
}
