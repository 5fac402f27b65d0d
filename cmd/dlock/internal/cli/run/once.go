package run

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// skipRecentRun reports whether COMMAND is to be skipped, having released
// lease, because the last successful run of NAME finished less than
// --once-per ago, and with which exit code.
func (r *runner) skipRecentRun(lease dlock.Lease) (int, bool) {
	ctx, cancel := context.WithDeadline(context.Background(), lease.Until())
	defer cancel()
	ago, found, err := r.target.LastRun(ctx, r.o.Name)
	if err != nil {
		r.release(lease)
		r.say("lock %q: %s", r.o.Name, cmdutil.Reason(err))
		return cmdutil.ExitUnavailable, true
	}
	if !found || ago >= r.o.OncePer {
		return 0, false
	}
	r.release(lease)
	r.say("skipping %q: the last successful run of %q finished %v ago, less than --once-per %v", r.o.Command[0], r.o.Name, cmdutil.Human(ago), r.o.OncePer)
	return cmdutil.ExitOK, true
}

// recordRun records, with --once-per, that COMMAND succeeded, while the
// lock is still held.
func (r *runner) recordRun(lease dlock.Lease) {
	deadline := time.Now().Add(ReleaseTimeout)
	if u := lease.Until(); u.Before(deadline) {
		deadline = u
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := r.target.RecordRun(ctx, r.o.Name, r.o.OncePer); err != nil {
		r.say("lock %q: %s; the next run within --once-per %v will not be skipped", r.o.Name, cmdutil.Reason(err), r.o.OncePer)
	}
}
