package journal

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/owner"
)

// TestErrorsSayWhatIsWrong: an invalid record is called that, not "invalid
// name", and still matches ErrBadName.
func TestErrorsSayWhatIsWrong(t *testing.T) {
	self, err := owner.Self()
	require.NoError(t, err)
	rec := &Record{Version: SchemaVersion, ID: NewID(self), Kind: KindPath, Owner: self}
	_, err = rec.Encode()
	require.ErrorIs(t, err, ErrBadName)
	assert.Equal(t, `journal: invalid record `+rec.ID+`: invalid phase ""`, err.Error())
	err = (&Root{}).Retire("../x")
	require.ErrorIs(t, err, ErrBadName)
	assert.Equal(t, `journal: record id "../x": invalid name`, err.Error())
}
