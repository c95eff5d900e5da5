package recover

// descPerRecord is how many descriptors ending one record holds at once:
// the subject's pidfd and a duplicate to wait on it (or one for reading
// /proc, connecting to a socket). A shortage beyond that is met by retrying
// the open and polling the held pidfd (terminate.go), not by failing.
const descPerRecord = 2

// fdSlots returns how many records may be ended at once: as many as the
// descriptors still free under the soft RLIMIT_NOFILE allow, at least one
// and at most most. Under a low limit (`ulimit -n 24`), recovery then ends
// orphans in waves, each with its full grace, instead of failing to open
// handles (EMFILE) for most of them; with the usual limits it is most.
func fdSlots(most int) int {
	free, ok := freeDescriptors()
	if !ok {
		return most
	}
	return min(max(1, free/descPerRecord), most)
}
