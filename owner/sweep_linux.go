package owner

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// groupSweeps coalesces the /proc sweeps behind [GroupAlive]. Recovery
// confirms many groups empty at the same moment (every orphan's group after
// one SIGKILL wave); each sweep reads every process's stat, so N
// independent sweeps of a machine running N orphans cost N². Callers that
// arrive while a sweep runs share the next one instead, which starts after
// they arrived: every caller still gets a state read after its call.
var groupSweeps sweeper

type sweeper struct {
	mu      sync.Mutex
	running bool
	next    *sweep
}

// sweep is one read of every process's group and state.
type sweep struct {
	done  chan struct{}
	alive map[int]bool // process groups with a member that is not a zombie
	err   error
}

// get returns the result of a sweep that started after the call.
func (s *sweeper) get() (map[int]bool, error) {
	s.mu.Lock()
	w := s.next
	if w == nil {
		w = &sweep{done: make(chan struct{})}
		s.next = w
	}
	if !s.running {
		s.running, s.next = true, nil
		go s.run(w)
	}
	s.mu.Unlock()
	<-w.done
	return w.alive, w.err
}

// run performs w, then the sweep waited for by callers that arrived
// meanwhile, until none is waiting.
func (s *sweeper) run(w *sweep) {
	for w != nil {
		w.alive, w.err = sweepGroups()
		close(w.done)
		s.mu.Lock()
		w, s.next = s.next, nil
		s.running = w != nil
		s.mu.Unlock()
	}
}

// sweepGroups reads /proc/PID/stat of every process (open, one read,
// close: procfs produces the whole line in one read) and returns the
// groups that have a member that is not a zombie.
func sweepGroups() (map[int]bool, error) {
	d, err := os.Open(procRoot)
	if err != nil {
		return nil, fmt.Errorf("owner: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("owner: %w", err)
	}
	alive := make(map[int]bool)
	var buf [1024]byte
	for _, n := range names {
		if n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		sf, ok := readStatRaw(procRoot+"/"+n+"/stat", buf[:])
		if ok && sf.state != 'Z' && sf.state != 'X' && sf.state != 'x' {
			alive[sf.pgid] = true
		}
	}
	return alive, nil
}

// readStatRaw reads and parses one stat file; ok is false when it vanished
// or does not parse (a process that exited meanwhile).
func readStatRaw(path string, buf []byte) (statFields, bool) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return statFields{}, false
	}
	defer unix.Close(fd)
	var n int
	for {
		n, err = unix.Read(fd, buf)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil || n <= 0 {
		return statFields{}, false
	}
	sf, err := parseStat(buf[:n])
	return sf, err == nil
}
