package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/backend"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/redlock"
	"golang.org/x/sys/unix"
)

// failed reports why the lock was not held, and returns the exit code
// that goes with it.
func (r *runner) failed(a acquired) int {
	if errors.Is(a.err, dlock.ErrKindMismatch) {
		// Another kind of lock holds the name, and no backend waits for
		// it: the name, or the --kind, is the mistake.
		r.say("lock %q: %s; use another name, or the --kind that holds it", r.o.Name, cmdutil.Reason(a.err))
		return cmdutil.ExitUsage
	}
	if errors.Is(a.err, dlock.ErrNotObtained) && notVoting(a.err) && r.o.Wait == 0 && !r.o.WaitForever {
		// Nobody holds it: the service cannot grant it yet. Exit 75
		// would tell a fleet's cron job that another host ran it.
		r.say("lock %q cannot be granted yet: %s; use --wait to wait for the nodes", r.o.Name, cmdutil.Reason(a.err))
		return cmdutil.ExitUnavailable
	}
	var down *dlock.UnavailableError
	if errors.As(a.err, &down) {
		// Checked before ErrNotObtained, which a wait that ended
		// while the service failed matches too: that is not a
		// conflict.
		r.sayUnavailable(down)
		return cmdutil.ExitUnavailable
	}
	if errors.Is(a.err, dlock.ErrNotObtained) {
		r.sayNotObtained(a)
		return r.o.ConflictExit
	}
	if d := backend.Denied(a.err); cmdutil.IsUsage(d) {
		return cmdutil.Fail(r.io, fmt.Errorf("dlock run: lock %q: %w", r.o.Name, d), cmdutil.ExitUsage)
	}
	if cmdutil.IsUsage(a.err) {
		return cmdutil.Fail(r.io, fmt.Errorf("dlock run: %w", a.err), cmdutil.ExitUsage)
	}
	if r.o.Kind == backend.KindSemaphore && strings.Contains(a.err.Error(), "this Semaphore was made with") {
		// zklock's refusal of another size, met after checkPermits
		// (a holder came meanwhile).
		r.say("lock %q: %s", r.o.Name, cmdutil.Reason(a.err))
		return cmdutil.ExitUsage
	}
	var u *unreachable
	if errors.As(a.err, &u) {
		r.say("cannot reach the lock service: %s", cmdutil.Reason(u.err))
	} else {
		r.say("lock %q: %s", r.o.Name, cmdutil.Reason(a.err))
	}
	return cmdutil.ExitUnavailable
}

// sayUnavailable says that the lock service is unavailable, on one line
// that is the same on every backend: which servers (as given on the
// command line), since when (UTC) and for how long, the last failure, and
// what --wait did:
//
//	dlock: lock "nightly": the lock service is unavailable: redis 10.0.0.5:6379 since 02:00:01.250Z (30.0s): dial tcp 10.0.0.5:6379: connect: connection refused; --wait 30s ended
func (r *runner) sayUnavailable(u *dlock.UnavailableError) {
	var tail string
	switch {
	case r.o.Wait > 0 && !r.o.WaitForever:
		tail = fmt.Sprintf("; --wait %v ended", r.o.Wait)
	case !r.o.WaitForever:
		tail = "; use --wait to wait for it"
	}
	r.say("lock %q: the lock service is unavailable: %s since %s (%v): %s%s", r.o.Name, r.spec.Describe(),
		u.Since.UTC().Format("15:04:05.000Z"), readable(time.Since(u.Since)), cmdutil.Reason(u.Err), tail)
}

// readable rounds d as dlock.UnavailableError does: whole milliseconds
// below a second, tenths of a second below a minute, whole seconds above.
func readable(d time.Duration) time.Duration {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond)
	case d < time.Minute:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// sayNotObtained says why the lock was not obtained: held by another
// owner, or what the service said, and how long dlock waited, if it did.
func (r *runner) sayNotObtained(a acquired) {
	why, holder := "is held by another owner", ""
	if r.o.Kind == backend.KindSemaphore {
		why = fmt.Sprintf("is full: its %d permits are taken", r.o.Permits)
		if r.o.Permits == 1 {
			why = "is full: its one permit is taken"
		}
	}
	if !plainConflict(a.err) {
		why = "was not obtained: " + cmdutil.Reason(a.err)
	} else {
		holder = r.holderNote(a.target)
	}
	switch {
	case r.o.Wait == 0 && !r.o.WaitForever && holder != "":
		r.say("lock %q %s (%s); use --wait to wait for it", r.o.Name, why, holder)
	case r.o.Wait == 0 && !r.o.WaitForever:
		r.say("lock %q %s; use --wait to wait for it", r.o.Name, why)
	case holder != "":
		r.say("lock %q %s (waited %v; %s)", r.o.Name, why, cmdutil.Human(a.waited), holder)
	default:
		r.say("lock %q %s (waited %v)", r.o.Name, why, cmdutil.Human(a.waited))
	}
}

// HolderTimeout bounds the look at who holds a lock that was not
// obtained: the message goes without it if the service is slow.
const HolderTimeout = time.Second

// holderNote says who holds the lock and for how long, `holder
// "host=…,pid=…,start=…", 12s left`, if t can tell within HolderTimeout;
// otherwise "".
func (r *runner) holderNote(t *backend.Target) string {
	if t == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), HolderTimeout)
	defer cancel()
	rep, err := t.Inspect(ctx, r.o.Name)
	if err != nil || len(rep.Holders) == 0 {
		return ""
	}
	var parts []string
	switch h := rep.Holders[0]; {
	case len(rep.Holders) > 1:
		parts = append(parts, fmt.Sprintf("%d holders", len(rep.Holders)))
	case h.Label != "":
		parts = append(parts, "holder "+cmdutil.Quote(h.Label))
	}
	if rep.TTLms > 0 {
		parts = append(parts, fmt.Sprintf("%v left", cmdutil.Human(rep.TTL())))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, ", ")
}

// plainConflict reports whether err, which matches dlock.ErrNotObtained,
// means only that another owner holds the lock: no cause, the end of the
// wait, or (Redlock) every node that answered holding it for another,
// rather than nodes failing or not voting yet.
func plainConflict(err error) bool {
	var nodeErr *redlock.NodeError
	switch {
	case err.Error() == dlock.ErrNotObtained.Error():
		return true
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return true
	case errors.As(err, &nodeErr), notVoting(err):
		return false
	}
	return strings.HasPrefix(cmdutil.Reason(err), "redlock: acquire of ")
}

// notVoting reports whether err, which matches dlock.ErrNotObtained, is
// Redlock's refusal by nodes that took the lock but sit out their restart
// window: the lock is free, but too few nodes may vote for it yet.
func notVoting(err error) bool {
	return strings.Contains(err.Error(), "may not vote yet")
}

// signame names s as kill(1) does: SIGTERM, not "terminated".
func signame(s os.Signal) string {
	if n, ok := s.(syscall.Signal); ok {
		if name := unix.SignalName(n); name != "" {
			return name
		}
	}
	return s.String()
}
