package backend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/internal/rediskeys"
	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// The record of a lock's last successful run ("dlock run --once-per") is
// the key dlock:{name}:done on Redis (on every Redlock master), holding
// the server's time in milliseconds when the run finished, and expiring
// --once-per after it; on PostgreSQL, a row of the table RunsTable, with
// its finish and expiry on the database's clock, deleted by the next
// record of any name once it has expired.

// CheckOncePer returns a UsageError if the backend spec describes cannot
// keep the record of a last run.
func CheckOncePer(spec Spec) error {
	switch spec.Kind() {
	case "redis", "redlock", "postgres":
		return nil
	}
	return cmdutil.Usagef("--once-per is available with Redis, Redlock and PostgreSQL, not yet with %s", spec.Kind())
}

func doneKey(name string) string { return rediskeys.For(name).Base + ":done" }

// LastRun returns how long ago the last successful run of name finished,
// on the server's clock, if its record has not expired. With Redlock, the
// most recent record of any master counts, and a majority must answer.
func (t *Target) LastRun(ctx context.Context, name string) (ago time.Duration, found bool, err error) {
	if t.pool != nil {
		return t.lastRunPG(ctx, name)
	}
	var errs []error
	answered := 0
	for i, rdb := range t.rdbs {
		a, ok, err := lastRunOn(ctx, rdb, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.spec.Redis[i].Addr, err))
			continue
		}
		answered++
		if ok && (!found || a < ago) {
			ago, found = a, true
		}
	}
	if answered <= len(t.rdbs)/2 {
		return 0, false, fmt.Errorf("reading the record of the last run: %w", joinErrs(errs))
	}
	return ago, found, nil
}

func lastRunOn(ctx context.Context, rdb *redis.Client, name string) (time.Duration, bool, error) {
	v, err := rdb.Get(ctx, doneKey(name)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	finished, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, nil // not dlock's: ignored, and overwritten by the next success
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return 0, false, err
	}
	return now.Sub(time.UnixMilli(finished)), true, nil
}

// RecordRun records that a run of name finished successfully now, for
// keep. With Redlock, a majority of masters must take the record.
func (t *Target) RecordRun(ctx context.Context, name string, keep time.Duration) error {
	if t.pool != nil {
		return t.recordRunPG(ctx, name, keep)
	}
	var errs []error
	for i, rdb := range t.rdbs {
		// The server's own time, in one script, so that LastRun reads
		// an age on one clock.
		err := recordScript.Run(ctx, rdb, []string{doneKey(name)}, keep.Milliseconds()).Err()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.spec.Redis[i].Addr, err))
		}
	}
	if len(errs) > 0 && len(t.rdbs)-len(errs) <= len(t.rdbs)/2 {
		return fmt.Errorf("recording the run: %w", joinErrs(errs))
	}
	return nil
}

// recordScript sets KEYS[1] to the server's time in milliseconds, expiring
// in ARGV[1] milliseconds.
var recordScript = redis.NewScript(`
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', KEYS[1], tostring(ms), 'PX', ARGV[1])
return ms
`)

// RunsTable is the PostgreSQL table of the records of --once-per, made by
// dlock when it first needs it.
const RunsTable = pglock.DefaultTable + "_runs"

const createRuns = `CREATE TABLE IF NOT EXISTS ` + RunsTable + ` (
	name        text PRIMARY KEY,
	finished_at timestamptz NOT NULL,
	expires_at  timestamptz NOT NULL
)`

func (t *Target) lastRunPG(ctx context.Context, name string) (time.Duration, bool, error) {
	if _, err := t.pool.Exec(ctx, createRuns); err != nil {
		return 0, false, fmt.Errorf("creating %s: %w", RunsTable, err)
	}
	var ms float64
	err := t.pool.QueryRow(ctx, `SELECT extract(epoch FROM now() - finished_at) * 1000 FROM `+RunsTable+
		` WHERE name = $1 AND expires_at > now()`, name).Scan(&ms)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the record of the last run: %w", err)
	}
	return time.Duration(ms * float64(time.Millisecond)), true, nil
}

func (t *Target) recordRunPG(ctx context.Context, name string, keep time.Duration) error {
	err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM `+RunsTable+` WHERE expires_at <= now()`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+RunsTable+` (name, finished_at, expires_at)
			VALUES ($1, now(), now() + $2 * interval '1 millisecond')
			ON CONFLICT (name) DO UPDATE SET finished_at = excluded.finished_at, expires_at = excluded.expires_at`,
			name, keep.Milliseconds())
		return err
	})
	if err != nil {
		return fmt.Errorf("recording the run: %w", err)
	}
	return nil
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
