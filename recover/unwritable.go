package recover

import (
	"errors"
	"fmt"
	"syscall"
)

// unwritable reports whether err says the root cannot be written at all: a
// read-only file system (EROFS), no space or no inode left (ENOSPC), or a
// quota reached (EDQUOT).
//
// Recovery never needs a write before it acts. A teardown ([Options.All])
// normally marks the root closing before it takes the exclusive lock, so
// that new admissions fail at once instead of queueing for the lock. When
// the marker cannot be written, the teardown takes the exclusive lock
// anyway (flock(2) needs no write), which still holds admissions off while
// it scans and ends what the records it can read name; it reports that the
// marker is missing, and everything it could not remove (records, sockets,
// paths, the root) is retained and reported, so the exit is 3, never 0.
func unwritable(err error) bool {
	return errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// markerProblem is the report line for a closing marker that could not be
// written.
func markerProblem(err error) string {
	return fmt.Sprintf("new admissions could not be blocked by the closing marker (%v); the exclusive lock holds them off while this recovery runs, and admissions are granted again after it", err)
}
