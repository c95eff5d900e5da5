package recover

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/owner"
)

// TestTempOfWriterInChildNamespace: a temp file's name gives its writer's
// PID and start time but not its PID namespace. A writer in a child
// namespace (a container publishing right now) is alive although this
// namespace's PID of that number is another process: its temp file stays.
// Once the writer is gone, the temp file goes. (Before, the parent judged
// such a writer by its own process of that PID, dead, and removed the temp
// file under a live publish.)
func TestTempOfWriterInChildNamespace(t *testing.T) {
	r, dir := openRoot(t)
	c := testroot.StartOpts(t, "sleeper", testroot.Options{Wrap: testroot.Unshare(t)})
	var ready sleeperReady
	require.NoError(t, json.Unmarshal(c.WaitReady("id"), &ready))
	w := ready.ID
	require.Equal(t, 1, w.PID, "the writer is its namespace's init")
	here, err := owner.Of(w.PID)
	require.NoError(t, err)
	require.NotEqual(t, w.StartTime, here.StartTime, "pid 1 here is another process")

	temp := fmt.Sprintf(".%d-%d-0000000a.json%d", w.PID, w.StartTime, 12345)
	path := filepath.Join(dir, "records", temp)
	require.NoError(t, os.WriteFile(path, []byte(`{"version":2`), 0o600))
	rep, err := Run(t.Context(), r, Options{Grace: time.Second, KeepRoot: true})
	require.NoError(t, err)
	assert.Empty(t, rep.Temps)
	assert.FileExists(t, path, "a live writer's temp file")

	c.Kill()
	awaitGone(t, w) // unshare's death kills the namespace (--kill-child)
	// Another namespace's process may have the same PID and start time
	// (the init of a namespace made in the same clock tick by a test
	// running beside this one): the name cannot tell them apart, and the
	// temp file must then stay.
	other, err := owner.LiveElsewhere(w.PID, w.StartTime)
	require.NoError(t, err)
	rep, err = Run(t.Context(), r, Options{Grace: time.Second, KeepRoot: true})
	require.NoError(t, err)
	if other {
		t.Logf("another namespace's pid %d started in the same tick: the temp file stays", w.PID)
		if still, err := owner.LiveElsewhere(w.PID, w.StartTime); err == nil && still {
			assert.FileExists(t, path)
		}
		return
	}
	assert.Equal(t, []string{temp}, rep.Temps)
	assert.NoFileExists(t, path)
}
