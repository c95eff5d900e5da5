package journal

import (
	"fmt"

	"github.com/ownerjournal/ownerjournal/owner"
)

// validVersion reports whether v is a schema version this package reads:
// the current one, and 1, written before identities carried their PID
// namespace and cgroups their id.
func validVersion(v int) bool { return v == SchemaVersion || v == 1 }

// validateV2 checks the fields version 2 added: a version 1 record carries
// none of them (it was not written with them, so a forged one is refused),
// and a cgroup id names a recorded cgroup.
func (rec *Record) validateV2() error {
	v1 := rec.Version == 1
	ids := []struct {
		what string
		id   *owner.Identity
	}{{"owner", &rec.Owner}, {"subject", rec.Subject}}
	for _, x := range ids {
		if x.id != nil && x.id.PIDNS != 0 && v1 {
			return fmt.Errorf("%s pid_ns in a version 1 record", x.what)
		}
	}
	switch {
	case rec.CgroupID != 0 && v1:
		return fmt.Errorf("cgroup_id in a version 1 record")
	case rec.CgroupID != 0 && rec.Cgroup == "":
		return fmt.Errorf("cgroup_id %d without a cgroup", rec.CgroupID)
	}
	return nil
}
