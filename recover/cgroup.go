package recover

import (
	"context"
	"time"
)

// endCgroup kills every member of a recorded cgroup and removes it. It is
// filled in by the cgroup containment (see internal/cgroup).
var endCgroup = func(ctx context.Context, path string, grace time.Duration) (string, error) {
	return "", nil
}
