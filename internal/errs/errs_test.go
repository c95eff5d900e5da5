package errs

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWrapf(t *testing.T) {
	gone := errors.New("owner: process gone")
	plain := errors.New("plain")
	for _, tt := range []struct {
		err, sentinel error
		want          string
	}{
		{Wrapf(gone, "owner: pid %d", 7), gone, "owner: pid 7: process gone"},
		{Wrapf(gone, "subject pid %d", 7), gone, "subject pid 7: owner: process gone"},
		{Wrapf(plain, "owner: pid 7"), plain, "owner: pid 7: plain"},
		{Quietf(gone, "owner: pid %d has exited", 7), gone, "owner: pid 7 has exited"},
	} {
		assert.Equal(t, tt.want, tt.err.Error())
		assert.ErrorIs(t, tt.err, tt.sentinel)
	}
}
