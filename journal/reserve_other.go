//go:build !linux

package journal

import (
	"errors"
	"fmt"
	"os"
)

// allocate is not available here: a sparse file would reserve nothing.
func allocate(f *os.File, size int64) error {
	return fmt.Errorf("journal: fallocate: %w", errors.ErrUnsupported)
}
