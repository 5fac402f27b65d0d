package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/backend"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// ConnectTimeout bounds one attempt to connect to the lock service. A
// server that refuses connections fails at once, and one that does not
// answer within backend.AnswerTimeout.
const ConnectTimeout = 15 * time.Second

// MinConnectTimeout is the least time the first attempt to connect is
// given when --wait is shorter.
const MinConnectTimeout = time.Second

// ConnectRetry is how long dlock waits between attempts to connect to a
// lock service that is unavailable, while --wait lasts.
var ConnectRetry = dlock.ExponentialBackoff(100*time.Millisecond, time.Second)

// ReleaseTimeout bounds the release after COMMAND exits.
const ReleaseTimeout = 10 * time.Second

// Main runs "dlock run" with args (without "run") and returns the exit code.
func Main(args []string, io cmdutil.IO) int {
	o, err := Parse(args, io.Getenv)
	if errors.Is(err, cmdutil.ErrHelp) {
		fmt.Fprint(io.Out, Usage)
		return cmdutil.ExitOK
	}
	if err != nil {
		return cmdutil.Fail(io, err, cmdutil.ExitUsage)
	}
	spec, err := o.Backend.Resolve(io.Getenv)
	if err == nil {
		err = backend.CheckName(spec.Kind(), o.Name)
	}
	if err == nil {
		err = backend.CheckKind(spec, o.Kind)
	}
	if err == nil {
		err = backend.CheckTTL(o.TTL)
	}
	if err == nil && o.OncePer > 0 {
		err = backend.CheckOncePer(spec)
	}
	for _, w := range spec.Warnings {
		fmt.Fprintln(io.Err, "dlock:", w)
	}
	if err != nil {
		return cmdutil.Fail(io, fmt.Errorf("dlock run: %w", err), cmdutil.ExitUsage)
	}
	spec.LongestTTL = o.TTL
	r := &runner{o: o, io: io, spec: spec}
	return r.run()
}

type runner struct {
	o    Options
	io   cmdutil.IO
	spec backend.Spec
	log  *slog.Logger // the logger of -v and --log-format json; see logger

	// Set once the lock is held:
	leaseTime time.Duration // the lease time in force: --ttl, or less on ZooKeeper
	grace     time.Duration // --grace, or less if the lease time is less than --ttl
	capAt     time.Time     // with --max-hold: when the hold ends, at the latest
	target    *backend.Target

	// status reports on a wait for the lock, with --wait.
	status *waitStatus

	// stopped is set by supervise when the lease was lost, or COMMAND was
	// stopped because it was about to be: "dlock elect --again" then
	// campaigns again.
	stopped bool
}

// say writes one line to stderr, prefixed with "dlock: ", with a long
// lock name cut short wherever it appears (see cmdutil.Shorten).
func (r *runner) say(format string, args ...any) {
	msg := cmdutil.Shorten("dlock: "+fmt.Sprintf(format, args...), r.o.Name)
	if r.o.LogFormat == cmdutil.LogJSON {
		r.logger().Info(msg)
		return
	}
	fmt.Fprintln(r.io.Err, msg)
}

type acquired struct {
	target *backend.Target
	lease  dlock.Lease
	waited time.Duration
	err    error
}

func (r *runner) run() int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	r.log = r.logger()
	var observers []dlock.Observer
	if r.o.Verbose {
		log := r.logger()
		observers = append(observers, dlock.LogObserver(log))
		r.spec.Log = log
	}
	if j, err := newShortJob(r.o, r.say); err != nil {
		return cmdutil.Fail(r.io, err, cmdutil.ExitUsage)
	} else if j != nil {
		defer j.finish() // after the release: the final values
		observers = append(observers, j)
	}
	if r.o.MetricsAddr != "" {
		m, err := serveMetrics(r.o.MetricsAddr)
		if err != nil {
			r.say("cannot serve metrics on --metrics-addr %s: %v", r.o.MetricsAddr, err)
			return cmdutil.ExitOSErr
		}
		defer m.close()
		observers = append(observers, m.observer)
	}

	if r.o.Wait > 0 || r.o.WaitForever {
		r.status = newWaitStatus(r)
		observers = append(observers, r.status)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan acquired, 1)
	go func() { got <- r.acquire(ctx, dlock.Observers(observers...)) }()
	var a acquired
	select {
	case a = <-got:
	case sig := <-sigs:
		cancel()
		a = <-got
		if a.target != nil {
			defer a.target.Close()
		}
		if a.lease != nil {
			r.release(a.lease)
		}
		r.say("interrupted by %s while waiting for lock %q", signame(sig), r.o.Name)
		return 128 + signum(sig)
	}
	if a.target != nil {
		defer a.target.Close()
	}
	if a.err != nil {
		return r.failed(a)
	}
	if r.o.Verbose {
		r.say("holding lock %q (fence %d) on %s after %v", r.o.Name, a.lease.Fence(), a.target.Describe(), cmdutil.Human(a.waited))
	}
	if r.o.MaxHold > 0 {
		// The library counts from the grant, a little before now: its
		// cap is at most this one.
		r.capAt = time.Now().Add(r.o.MaxHold)
	}
	r.target = a.target
	if r.o.OncePer > 0 {
		if code, skip := r.skipRecentRun(a.lease); skip {
			return code
		}
	}
	r.setGrace(a.target.LeaseTime(r.o.TTL))
	if len(r.o.Command) == 0 {
		return r.hold(a.lease, sigs)
	}
	return r.supervise(a.lease, sigs)
}

// hold holds lease, with no COMMAND, until SIGINT, SIGTERM, SIGHUP or
// SIGQUIT, then releases it and returns 0; or until it is lost (76) or
// reaches --max-hold (79), as "etcdctl lock NAME" holds.
func (r *runner) hold(lease dlock.Lease, sigs <-chan os.Signal) int {
	r.say("holding lock %q (fence %d); SIGINT or SIGTERM releases it", r.o.Name, lease.Fence())
	select {
	case sig := <-sigs:
		if err := r.release(lease); err != nil && errors.Is(err, dlock.ErrNotHeld) {
			r.say("lock %q was lost before %s released it (%s)", r.o.Name, signame(sig), cmdutil.Reason(err))
			return cmdutil.ExitLost
		}
		r.say("released lock %q on %s", r.o.Name, signame(sig))
		return cmdutil.ExitOK
	case <-lease.Done():
		if err := lease.Err(); errors.Is(err, dlock.ErrMaxHold) {
			r.say("lock %q reached --max-hold %v and was released", r.o.Name, r.o.MaxHold)
			return cmdutil.ExitMaxHold
		}
		r.say("lost lock %q: %s", r.o.Name, cmdutil.Reason(lease.Err()))
		return cmdutil.ExitLost
	}
}

// setGrace sets the lease time in force and the grace that goes with it.
// On ZooKeeper a lease lasts at most a third of the session timeout,
// which may be less than --ttl: the grace must fit that lease time.
func (r *runner) setGrace(leaseTime time.Duration) {
	r.leaseTime, r.grace = leaseTime, r.o.Grace
	switch {
	case leaseTime >= r.o.TTL:
	case !r.o.graceGiven:
		r.grace = GraceFor(leaseTime)
	case r.grace > MaxGrace(leaseTime):
		r.grace = MaxGrace(leaseTime)
		r.say("--grace %v cut to %v: a lease here lasts %v, less than --ttl %v (on ZooKeeper, a third of the session timeout)",
			r.o.Grace, r.grace, leaseTime, r.o.TTL)
	}
}

// acquire connects and takes the lock as the flags say. --wait counts
// from now, connecting included: a lock service that is unavailable is
// waited for as a lock that is held is.
func (r *runner) acquire(ctx context.Context, obs dlock.Observer) (a acquired) {
	start := time.Now()
	wctx, cancel := r.waitContext(ctx, start)
	defer cancel()
	t, err := r.connect(ctx, wctx, obs, r.o.Wait > 0 || r.o.WaitForever)
	if err != nil {
		return acquired{err: err}
	}
	a.target = t
	l, err := t.Locker(r.o.Name, backend.LockOptions{Kind: r.o.Kind, Permits: r.o.Permits, TTL: r.o.TTL, MaxHold: r.o.MaxHold})
	if err != nil {
		a.err = err
		return a
	}
	if r.o.Kind == backend.KindSemaphore {
		if a.err = r.checkPermits(ctx, t); a.err != nil {
			return a
		}
	}
	label := holderLabel(start)
	if r.o.Wait > 0 || r.o.WaitForever {
		sctx, stop := context.WithCancel(ctx)
		reported := make(chan struct{})
		go func() {
			defer close(reported)
			if r.status != nil {
				r.status.run(sctx, t, start)
			}
		}()
		a.lease, a.err = l.Lock(dlock.WithLabel(wctx, label))
		stop()
		<-reported
	} else {
		a.lease, a.err = l.TryLock(dlock.WithLabel(ctx, label))
	}
	a.waited = time.Since(start)
	return a
}

// waitContext returns ctx ending when --wait, counted from start, does;
// without --wait, or with --wait forever, ctx as it is.
func (r *runner) waitContext(ctx context.Context, start time.Time) (context.Context, context.CancelFunc) {
	if r.o.Wait > 0 && !r.o.WaitForever {
		return context.WithDeadline(ctx, start.Add(r.o.Wait))
	}
	return context.WithCancel(ctx)
}

// connect connects to the lock service (backend.Connect) and prints what
// the connection warns of. If wait, it tries again, backing off
// (ConnectRetry), while the service is unavailable, until wctx ends (at the
// end of --wait; never with --wait forever); otherwise it tries once. Each
// attempt ends by ConnectTimeout, and by the end of --wait, except that the
// first is given MinConnectTimeout at least. ctx ends on a signal.
//
// Its error is an *unreachable, with one that no new attempt heals
// (backend.Permanent) as it is, or a *dlock.UnavailableError naming the
// service and since when it has failed, and the last attempt's error.
func (r *runner) connect(ctx, wctx context.Context, obs dlock.Observer, wait bool) (*backend.Target, error) {
	since := time.Now()
	for attempt := 1; ; attempt++ {
		timeout := ConnectTimeout
		if d, ok := wctx.Deadline(); ok {
			timeout = min(timeout, time.Until(d))
			if attempt == 1 {
				timeout = max(timeout, MinConnectTimeout)
			}
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		t, err := backend.Connect(cctx, r.spec, obs)
		cancel()
		if err == nil {
			for _, w := range t.Warnings() {
				r.say("%s", w)
			}
			return t, nil
		}
		switch {
		case ctx.Err() != nil: // a signal
			return nil, &unreachable{dlock.NotObtained(ctx.Err())}
		case backend.Permanent(err):
			return nil, &unreachable{err}
		}
		err = dlock.Unavailable(r.spec.Describe(), since, err)
		if !wait || wctx.Err() != nil {
			return nil, &unreachable{err}
		}
		if attempt == 1 && r.o.Verbose {
			r.say("%s; trying again %s", cmdutil.Reason(err), r.until())
		}
		pause, _ := ConnectRetry.Backoff(attempt)
		select {
		case <-time.After(pause):
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, &unreachable{dlock.NotObtained(ctx.Err())}
			}
			return nil, &unreachable{err}
		}
	}
}

// until says until when dlock waits: "until --wait 5m ends", or "until
// it answers" with --wait forever.
func (r *runner) until() string {
	if r.o.WaitForever {
		return "until it answers"
	}
	return fmt.Sprintf("until --wait %v ends", r.o.Wait)
}

// checkPermits returns a UsageError if the semaphore NAME exists with
// another number of permits than --permits: the libraries would use the
// stored number (Redis) or refuse (ZooKeeper), and neither says so
// clearly.
func (r *runner) checkPermits(ctx context.Context, t *backend.Target) error {
	ctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	rep, err := t.Inspect(ctx, r.o.Name)
	if err != nil {
		return err
	}
	if rep.PermitLimit > 0 && rep.PermitLimit != r.o.Permits {
		return permitsMismatch(r.o.Name, r.o.Permits, rep.PermitLimit)
	}
	return nil
}

func permitsMismatch(name string, given, stored int) error {
	return cmdutil.Usagef("--permits %d disagrees with the semaphore %s, which has %d permits while it is in use: use --permits %d, or another name",
		given, cmdutil.Quote(name), stored, stored)
}

// unreachable is a failure to connect to the lock service.
type unreachable struct{ err error }

func (u *unreachable) Error() string { return u.err.Error() }
func (u *unreachable) Unwrap() error { return u.err }

// release releases lease, reporting a failure on stderr.
func (r *runner) release(lease dlock.Lease) error {
	err := r.releaseQuietly(lease)
	if err != nil && !errors.Is(err, dlock.ErrNotHeld) {
		r.say("releasing lock %q: %s; it expires by itself within --ttl %v", r.o.Name, cmdutil.Reason(err), r.o.TTL)
	}
	return err
}

// releaseQuietly releases lease, giving up after ReleaseTimeout or at the
// lease's Until, when it ends by itself.
func (r *runner) releaseQuietly(lease dlock.Lease) error {
	deadline := time.Now().Add(ReleaseTimeout)
	if u := lease.Until(); u.Before(deadline) {
		deadline = u
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	return lease.Release(ctx)
}

func signum(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return 1
}

// holderLabel is what dlock run says about itself with every grant, for
// dlock inspect to show: host, process id and the time it asked, without
// spaces, since the label ends the token that COMMAND gets in DLOCK_TOKEN.
func holderLabel(asked time.Time) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("host=%s,pid=%d,start=%s", host, os.Getpid(), asked.UTC().Format(time.RFC3339))
}
