package journal

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/owner"
)

func TestLeaseName(t *testing.T) {
	id := owner.Identity{PID: 4242, StartTime: 987654, BootID: "0d8c7a3e-5f0e-4a57-9d3c-1c1a8f6b2f10", PIDNS: 4026531836}
	name, ok := leaseName(id)
	require.True(t, ok)
	assert.Equal(t, "leases/4242-987654-4026531836-0d8c7a3e-5f0e-4a57-9d3c-1c1a8f6b2f10", name)
	got, ok := parseLeaseName(strings.TrimPrefix(name, leasesDir+"/"))
	require.True(t, ok)
	assert.Equal(t, id, got)

	// The name version 1 wrote parses with no boot id: it proves nothing.
	got, ok = parseLeaseName("4242-987654")
	require.True(t, ok)
	assert.Equal(t, owner.Identity{PID: 4242, StartTime: 987654}, got)

	for _, bad := range []string{"", "x", "1", "0-1", "-1-2", "1-2-3", "1-2-3-", "1-2-x-boot", "1-2-3-b/oot", "+1-2", "1-2-3-b\x00",
		"1-99999999999999999999999-3-b", "1-2-3-" + strings.Repeat("b", 65), "01-2", "1-02-3-b", "1-2-03-b", "1-2-+3-b"} {
		_, ok := parseLeaseName(bad)
		assert.False(t, ok, "%q", bad)
	}
	_, ok = leaseName(owner.Identity{PID: 1, StartTime: 1, BootID: "../x"})
	assert.False(t, ok, "a boot id that is not a name")
	_, ok = leaseName(owner.Identity{PID: 1, StartTime: 1})
	assert.False(t, ok, "no boot id")
}

// FuzzParseLeaseName: never panics; an accepted name with a boot id names
// the identity that leaseName turns back into the same name (so only
// canonical numbers are accepted).
func FuzzParseLeaseName(f *testing.F) {
	f.Add("4242-987654-4026531836-0d8c7a3e-5f0e-4a57-9d3c-1c1a8f6b2f10")
	f.Add("4242-987654")
	f.Add("1-2-3-")
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := parseLeaseName(s)
		if !ok || id.BootID == "" {
			return
		}
		name, ok := leaseName(id)
		require.True(t, ok)
		require.Equal(t, leasesDir+"/"+s, name)
	})
}
