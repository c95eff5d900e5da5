package recover

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/journal"
)

// TestMissingLockFileIsNotARemovedRoot: a root whose lock file is gone
// while the root itself is still there was not removed: recovery must not
// report "root removed" and a clean end (exit 0) for it, in either mode.
func TestMissingLockFileIsNotARemovedRoot(t *testing.T) {
	for _, all := range []bool{false, true} {
		t.Run(fmt.Sprintf("all=%v", all), func(t *testing.T) {
			r, dir := openRoot(t)
			s := startSleeper(t)
			publish(t, r, &journal.Record{Subject: &s.ID, Owner: deadIdentity(t)})
			require.NoError(t, os.Remove(filepath.Join(dir, "lock")))

			rep, err := Run(context.Background(), r, Options{All: all, Grace: 5 * time.Second})
			require.DirExists(t, dir, "nothing removes the root without its lock")
			if err == nil {
				require.False(t, rep.RootRemoved, "%+v", rep)
				require.False(t, rep.Clean(), "%+v", rep)
			} else {
				require.Contains(t, err.Error(), filepath.Join(dir, "lock"))
			}
		})
	}
}
