package owner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestErrorsSayItOnce: an error wrapping a sentinel names the package once
// ("owner: pid N: process gone", not "owner: pid N: owner: process gone")
// and still matches the sentinel.
func TestErrorsSayItOnce(t *testing.T) {
	_, err := Of(2147483647)
	require.ErrorIs(t, err, ErrGone)
	assert.Equal(t, "owner: pid 2147483647: process gone", err.Error())
	_, err = Of(-1)
	require.ErrorIs(t, err, ErrGone)
	assert.Equal(t, "owner: invalid pid -1: process gone", err.Error())
}
