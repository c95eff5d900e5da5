package owner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
)

// procFixture points procRoot at a fixture proc tree (readable by every
// user) for the rest of the test and returns it. The boot id and host name
// are read (and cached) from the real system first.
func procFixture(t *testing.T) (dir, boot, host string) {
	t.Helper()
	boot, err := bootID()
	require.NoError(t, err)
	host, err = hostOnce()
	require.NoError(t, err)
	dir = testroot.Dir(t)
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sys/kernel/random"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sys/kernel/random/boot_id"), []byte(boot+"\n"), 0o644))
	old := procRoot
	procRoot = dir
	t.Cleanup(func() { procRoot = old })
	return dir, boot, host
}

// writeStat creates DIR/PID/stat with contents and mode.
func writeStat(t *testing.T, dir string, pid int, contents string, mode os.FileMode) string {
	t.Helper()
	pd := filepath.Join(dir, strconv.Itoa(pid))
	require.NoError(t, os.Mkdir(pd, 0o755))
	p := filepath.Join(pd, "stat")
	require.NoError(t, os.WriteFile(p, []byte(contents), mode))
	require.NoError(t, os.Chmod(p, mode))
	return p
}

func TestProcFixture(t *testing.T) {
	uid, gid := testroot.SecondUser(t)
	dir, boot, host := procFixture(t)
	const start = 5000
	tests := []struct {
		name   string
		setup  func(t *testing.T, pid int)
		forge  func(id *Identity)
		state  State
		reason string
		ofErr  error // nil: Of succeeds and returns the identity
	}{
		{
			name:  "alive",
			setup: func(t *testing.T, pid int) { writeStat(t, dir, pid, statLine(pid, "sleep", 'S', 1, pid, start), 0o444) },
			state: Alive, reason: "running",
		},
		{
			name: "comm with ) (",
			setup: func(t *testing.T, pid int) {
				writeStat(t, dir, pid, statLine(pid, ") (x) S 1 1 1", 'R', 1, pid, start), 0o444)
			},
			state: Alive, reason: "running",
		},
		{
			name:  "zombie",
			setup: func(t *testing.T, pid int) { writeStat(t, dir, pid, statLine(pid, "sh", 'Z', 1, pid, start), 0o444) },
			state: Dead, reason: "zombie", ofErr: ErrGone,
		},
		{
			name:  "dead (X)",
			setup: func(t *testing.T, pid int) { writeStat(t, dir, pid, statLine(pid, "sh", 'X', 1, pid, start), 0o444) },
			state: Dead, reason: "zombie", ofErr: ErrGone,
		},
		{
			name:  "pid reused",
			setup: func(t *testing.T, pid int) { writeStat(t, dir, pid, statLine(pid, "sh", 'S', 1, pid, start+1), 0o444) },
			state: Dead, reason: "reused",
		},
		{
			name:  "no such pid",
			setup: func(t *testing.T, pid int) {},
			state: Dead, reason: "not running", ofErr: ErrGone,
		},
		{
			name:  "malformed stat",
			setup: func(t *testing.T, pid int) { writeStat(t, dir, pid, "garbage", 0o444) },
			state: Unknown, reason: "malformed", ofErr: ErrUnverifiable,
		},
		{
			name:  "empty stat",
			setup: func(t *testing.T, pid int) { writeStat(t, dir, pid, "", 0o444) },
			state: Unknown, reason: "malformed", ofErr: ErrUnverifiable,
		},
		{
			name: "truncated stat",
			setup: func(t *testing.T, pid int) {
				writeStat(t, dir, pid, statLine(pid, "sh", 'S', 1, pid, start)[:40], 0o444)
			},
			state: Unknown, reason: "malformed", ofErr: ErrUnverifiable,
		},
		{
			name: "stat is a directory",
			setup: func(t *testing.T, pid int) {
				require.NoError(t, os.MkdirAll(filepath.Join(dir, strconv.Itoa(pid), "stat"), 0o755))
			},
			state: Unknown, reason: "is a directory", ofErr: ErrUnverifiable,
		},
		{
			name: "other user's process recorded as root",
			setup: func(t *testing.T, pid int) {
				p := writeStat(t, dir, pid, statLine(pid, "sh", 'S', 1, pid, start), 0o444)
				require.NoError(t, os.Chown(p, uid, gid))
			},
			state: Unknown, reason: "runs as uid " + strconv.Itoa(uid),
		},
		{
			name: "other user's process recorded so",
			setup: func(t *testing.T, pid int) {
				p := writeStat(t, dir, pid, statLine(pid, "sh", 'S', 1, pid, start), 0o444)
				require.NoError(t, os.Chown(p, uid, gid))
			},
			forge: func(id *Identity) { id.UID = uid },
			state: Alive, reason: "running",
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pid := 1000 + i
			tt.setup(t, pid)
			id := Identity{PID: pid, StartTime: start, BootID: boot, UID: 0, Host: host}
			if tt.forge != nil {
				tt.forge(&id)
			}
			v := Check(id)
			assert.Equal(t, tt.state, v.State, v.Reason)
			assert.Contains(t, v.Reason, tt.reason)

			got, err := Of(pid)
			if tt.ofErr != nil {
				require.ErrorIs(t, err, tt.ofErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, pid, got.PID)
		})
	}
}

// TestProcFixtureUnreadable runs Check as the unprivileged test user (root
// reads any file) against a stat file it may not read: permission denied is
// Unknown, never Dead.
func TestProcFixtureUnreadable(t *testing.T) {
	uid, gid := testroot.SecondUser(t)
	dir, boot, host := procFixture(t)
	tests := []struct {
		name   string
		mode   os.FileMode
		state  string
		reason string
	}{
		{name: "readable (control)", mode: 0o444, state: "alive"},
		{name: "unreadable", mode: 0o000, state: "unknown", reason: "permission denied"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pid := 2000 + i
			writeStat(t, dir, pid, statLine(pid, "sleep", 'S', 1, pid, 7), tt.mode)
			id, err := json.Marshal(Identity{PID: pid, StartTime: 7, BootID: boot, UID: 0, Host: host})
			require.NoError(t, err)
			c := testroot.StartOpts(t, "check-fixture", testroot.Options{
				Env:        []string{"OJ_PROC=" + dir, "OJ_ID=" + string(id)},
				Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
			})
			res := decodeResult(t, c.WaitReady("result"))
			require.NoError(t, c.Wait())
			assert.Equal(t, tt.state, res.State, "%+v", res)
			assert.Contains(t, res.Reason, tt.reason)
			if tt.reason != "" {
				assert.True(t, res.Unverified, "Of: %s", res.Err)
			} else {
				assert.Empty(t, res.Err)
			}
		})
	}
}

func decodeResult(t *testing.T, b []byte) childResult {
	t.Helper()
	var res childResult
	require.NoError(t, json.Unmarshal(b, &res), "%s", b)
	return res
}
