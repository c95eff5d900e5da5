package journal

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
)

// Reserve is space set aside in a participant's own lease file so that the
// participant can still write records when the root's file system fills up,
// the way databases keep a reserve file: when a publish fails with ENOSPC,
// [Reserve.Release] gives back part of it and the publish is retried.
//
// The reserve lives in the lease file, not in a file of its own, so it adds
// no entry to the root: a participant that dies (SIGKILL included) leaves
// nothing that recovery does not already remove with the free lease.
//
// Caveats: it reserves bytes (blocks), not inodes; a file system out of
// inodes is not helped by it. Where fallocate(2) is not available (darwin,
// file systems without it) [Lease.Reserve] returns an error wrapping
// [errors.ErrUnsupported]. A Reserve is safe for concurrent use.
type Reserve struct {
	mu   sync.Mutex
	f    *os.File
	size int64
}

// Reserve allocates up to size bytes in the lease file. When the file system
// has less room, it halves the request down to min and keeps what it got;
// it fails (an error wrapping ENOSPC) only if not even min could be had.
func (l *Lease) Reserve(size, min int64) (*Reserve, error) {
	// The lease's own descriptor (opened read-write beneath the root when
	// the lease was taken): no second open, no name looked up again, and
	// no extra descriptor for a participant running at a low fd limit.
	f := l.fl.f
	var err error
	for {
		err = allocate(f, size)
		if err == nil || !errors.Is(err, syscall.ENOSPC) || size/2 < min {
			break
		}
		size /= 2
	}
	if err != nil {
		return nil, fmt.Errorf("journal: reserve %d bytes in %s: %w", size, l.name, err)
	}
	return &Reserve{f: f, size: size}, nil
}

// Size returns the bytes still reserved.
func (rs *Reserve) Size() int64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.size
}

// Release gives back up to n bytes of the reserve to the file system (the
// lease file is truncated, which frees its blocks at once) and returns how
// many bytes it gave back: 0 once the reserve is spent.
func (rs *Reserve) Release(n int64) (int64, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.f == nil || rs.size == 0 {
		return 0, nil
	}
	n = min(n, rs.size)
	if err := rs.f.Truncate(rs.size - n); err != nil {
		return 0, fmt.Errorf("journal: release reserve: %w", err)
	}
	rs.size -= n
	return n, nil
}

// Close gives up the reserve's use of the lease's descriptor (which closes
// with the lease); the space stays with the lease file until the lease is
// released.
func (rs *Reserve) Close() error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.f = nil
	return nil
}
