package recover

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Deadline terms; see [Options.Deadline].
const (
	// deadlineGraces is how many grace periods a recovery may spend after
	// the wait for creators: SIGTERM and its grace, the wait after
	// SIGKILL, a cgroup.kill, the wait for participants, a second pass.
	deadlineGraces = 4
	// deadlineSlack covers the fixed costs: tmux clients, socket probes,
	// scans, unlinks, the root's removal.
	deadlineSlack = 10 * time.Second
)

// Deadline is the bound on a whole recovery with these options:
//
//	Wait (only with All, and not in a dry run) + 4 × Grace + 10 s
//
// with Grace and Wait defaulted as [Run] does. Past it [Run] starts nothing
// new and abandons every wait still pending (a tmux client is killed, a wait
// for an exit ends); what is not verified gone by then is retained (exit 3
// from the CLI) with the reason "deadline exceeded after D", and the root
// stays. `--grace 1s` bounds a recovery without --all to 14 s whatever the
// journal names. A signal to the recoverer never extends it.
func (o Options) Deadline() time.Duration {
	grace, wait := o.Grace, o.Wait
	if grace <= 0 {
		grace = DefaultGrace
	}
	if wait <= 0 {
		wait = DefaultWait
	}
	d := deadlineGraces*grace + deadlineSlack
	if o.All && !o.DryRun {
		d += wait
	}
	return d
}

// withDeadline bounds ctx by d; when d passes, context.Cause(ctx) says
// "deadline exceeded after d".
func withDeadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, fmt.Errorf("deadline exceeded after %v", d))
}

// overdue returns "" while ctx is live, else why it ended ("deadline
// exceeded after D", or the caller's cancel).
func overdue(ctx context.Context) string {
	if ctx.Err() == nil {
		return ""
	}
	return context.Cause(ctx).Error()
}

// markOverdue makes what an ended ctx cut short say so: a record retained
// after the deadline names the deadline first.
func markOverdue(ctx context.Context, a *Action) {
	if why := overdue(ctx); why != "" && a.Retained != "" && !strings.HasPrefix(a.Retained, why) {
		a.Retained = why + ": " + a.Retained
	}
}
