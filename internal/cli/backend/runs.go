package backend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dlock-go/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/internal/rediskeys"
	"github.com/redis/go-redis/v9"
)

// The record of a lock's last successful run ("dlock run --once-per") is
// the key dlock:{name}:done on Redis (on every Redlock master), holding
// the server's time in milliseconds when the run finished, and expiring
// --once-per after it.

// CheckOncePer returns a UsageError if the backend spec describes cannot
// keep the record of a last run.
func CheckOncePer(spec Spec) error {
	switch spec.Kind() {
	case "redis", "redlock":
		return nil
	}
	return cmdutil.Usagef("--once-per is available with Redis and Redlock only, not yet with %s", spec.Kind())
}

func doneKey(name string) string { return rediskeys.For(name).Base + ":done" }

// LastRun returns how long ago the last successful run of name finished,
// on the server's clock, if its record has not expired. With Redlock, the
// most recent record of any master counts, and a majority must answer.
func (t *Target) LastRun(ctx context.Context, name string) (ago time.Duration, found bool, err error) {
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
		return 0, false, fmt.Errorf("reading the record of the last run: %w", errors.Join(errs...))
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
		return fmt.Errorf("recording the run: %w", errors.Join(errs...))
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
