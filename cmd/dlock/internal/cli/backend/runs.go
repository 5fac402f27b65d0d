package backend

import (
	"context"
	"time"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// The record of a lock's last successful run ("dlock run --once-per") is
// kept by the backends whose driver says oncePer: a key on every Redis
// server (redis.go), a row of RunsTable on PostgreSQL (postgres.go).

// CheckOncePer returns a UsageError if the backend spec describes cannot
// keep the record of a last run.
func CheckOncePer(spec Spec) error {
	if d := driverOf(spec); d != nil && d.oncePer {
		return nil
	}
	return cmdutil.Usagef("--once-per is available with %s, not yet with %s", inWords(each(func(d *driver) bool { return d.oncePer }, func(d *driver) string { return d.title }), " and "), spec.Kind())
}

// LastRun returns how long ago the last successful run of name finished,
// on the server's clock, if its record has not expired. With Redlock, the
// most recent record of any master counts, and a majority must answer.
func (t *Target) LastRun(ctx context.Context, name string) (ago time.Duration, found bool, err error) {
	r, ok := t.c.(runRecorder)
	if !ok {
		return 0, false, CheckOncePer(t.spec)
	}
	return r.lastRun(ctx, name)
}

// RecordRun records that a run of name finished successfully now, for
// keep. With Redlock, a majority of masters must take the record.
func (t *Target) RecordRun(ctx context.Context, name string, keep time.Duration) error {
	r, ok := t.c.(runRecorder)
	if !ok {
		return CheckOncePer(t.spec)
	}
	return r.recordRun(ctx, name, keep)
}

// ClearRun removes the record of the last successful run of name, so that
// the next dlock run --once-per runs COMMAND, and reports whether there was
// one (an expired one may count). With Redlock, it removes it from every
// master that answers, and fails if a majority does not.
func (t *Target) ClearRun(ctx context.Context, name string) (bool, error) {
	r, ok := t.c.(runRecorder)
	if !ok {
		return false, CheckOncePer(t.spec)
	}
	return r.clearRun(ctx, name)
}

// MaxTTL is the longest --ttl on every backend: the MaxTTL of every
// backend package. A lease is renewed while COMMAND runs, so a longer TTL would only
// keep the lock of a dlock that died from its successors for longer.
const MaxTTL = 24 * time.Hour

// CheckTTL returns a UsageError if ttl is longer than MaxTTL.
func CheckTTL(ttl time.Duration) error {
	if ttl > MaxTTL {
		return cmdutil.Usagef("--ttl %v is longer than %v, the longest dlock takes (the lease is renewed while COMMAND runs; a long TTL only delays the next holder after a crash)", ttl, MaxTTL)
	}
	return nil
}
