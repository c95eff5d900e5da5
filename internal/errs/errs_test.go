package errs

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWrapf(t *testing.T) {
	gone := errors.New("owner: process gone")
	for _, tt := range []struct {
		err  error
		want string
	}{
		{Wrapf(gone, "owner: pid %d", 7), "owner: pid 7: process gone"},
		{Wrapf(gone, "subject pid %d", 7), "subject pid 7: owner: process gone"},
		{Wrapf(errors.New("plain"), "owner: pid 7"), "owner: pid 7: plain"},
		{Quietf(gone, "owner: pid %d has exited", 7), "owner: pid 7 has exited"},
	} {
		assert.Equal(t, tt.want, tt.err.Error())
		assert.ErrorIs(t, tt.err, gone)
	}
}
