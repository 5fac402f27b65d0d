package fence

import (
	"cmp"
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redisconn"
)

// A Resetter is a Store whose record of a resource's newest fence an
// operator can set, even lower than it is: the Stores of NewMemory,
// (*Redis).Store and (*SQL).Store are Resetters.
//
// A guard trusts the fences it is given. One that accepted a fence no
// holder of the lock has (a forged request to a Handler, or a resource
// moved to another lock) refuses every real holder as stale from then
// on, across restarts; Reset is the way out.
type Resetter interface {
	Store
	// Reset records fence as the newest accepted for resource, whatever
	// was recorded, and returns what was (0 for nothing). Fence 0
	// removes the record: the next fence of any value is accepted. It
	// reports the reset to the guard's observer, as a
	// dlock.EventFenceReset.
	//
	// A reset lets through any write with a fence from the new record
	// up: set it to the lock's latest fence (which "dlock inspect"
	// shows), not lower, so that a holder the lock has since replaced
	// stays refused.
	Reset(ctx context.Context, resource string, fence uint64) (previous uint64, err error)
}

// checkReset is checkInput for a reset, whose fence may be 0.
func checkReset(resource string, fence uint64, maxLen int) error {
	if fence > math.MaxInt64 {
		return badInput{fmt.Sprintf("fence: fence %d for %q is not one a lease gives: want 0 to 2^63-1", fence, resource)}
	}
	return checkInput(resource, max(fence, 1), maxLen)
}

// observeReset reports a reset of resource's record from previous to
// fence.
func observeReset(o dlock.Observer, guard, resource string, previous, fence uint64) {
	if o != nil {
		o.Observe(dlock.Event{Kind: dlock.EventFenceReset, Name: resource, Lock: guard, Fence: fence, Previous: previous})
	}
}

func (m *memory) Reset(_ context.Context, resource string, fence uint64) (uint64, error) {
	if err := checkReset(resource, fence, maxResource); err != nil {
		return 0, err
	}
	m.mu.Lock()
	previous := m.newest[resource]
	if fence == 0 {
		delete(m.newest, resource)
	} else {
		m.newest[resource] = fence
	}
	m.mu.Unlock()
	observeReset(m.observer, "Memory", resource, previous, fence)
	return previous, nil
}

//go:embed lua/reset.lua
var resetSrc string

var resetScript = redisconn.NewScript("reset", resetSrc)

// Reset records fence as the newest written to key, whatever was
// recorded, and returns what was (0 for nothing); fence 0 removes the
// record. It reports the reset to the guard's observer. It is for an
// operator (see Resetter): a reset lets through any write with a fence
// from the new record up. It works whatever the server's persistence.
func (r *Redis) Reset(ctx context.Context, key string, fence uint64) (previous uint64, err error) {
	if err := checkReset(key, fence, maxResource); err != nil {
		return 0, err
	}
	fk, legacy, err := guardKeys(key)
	if err != nil {
		return 0, err
	}
	results := make([]redisconn.Result, 1)
	r.conn.Eval(ctx, []redisconn.Call{{Script: resetScript, Keys: []string{fk, cmp.Or(legacy, fk)}, Args: []string{strconv.FormatUint(fence, 10)}}}, results)
	if err := results[0].Err; err != nil {
		return 0, fmt.Errorf("fence: resetting the fence of Redis key %q: %w", key, err)
	}
	s, _ := results[0].Val.(string)
	previous, perr := strconv.ParseUint(s, 10, 64)
	if perr != nil {
		return 0, fmt.Errorf("fence: resetting the fence of Redis key %q: unexpected reply %v", key, results[0].Val)
	}
	observeReset(r.observer, "Redis", key, previous, fence)
	return previous, nil
}

func (s redisStore) Reset(ctx context.Context, resource string, fence uint64) (uint64, error) {
	return s.r.Reset(ctx, resource, fence)
}

// Reset records fence as the newest written to resource in db, whatever
// was recorded, in a transaction of its own, and returns what was (0 for
// nothing); fence 0 removes the resource's row. It reports the reset to
// the guard's observer. It is for an operator (see Resetter): a reset
// lets through any write with a fence from the new record up.
func (g *SQL) Reset(ctx context.Context, db *sql.DB, resource string, fence uint64) (previous uint64, err error) {
	if g.err != nil {
		return 0, g.err
	}
	if strings.IndexByte(resource, 0) >= 0 {
		return 0, badInput{fmt.Sprintf("fence: resource name %q holds a NUL byte, which SQL text cannot", resource)}
	}
	if err := checkReset(resource, fence, maxSQLResource); err != nil {
		return 0, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("fence: resetting the fence of %q: %w", resource, err)
	}
	defer tx.Rollback() // after a Commit, it does nothing
	if g.dialect.syncCommit != "" {
		if _, err := tx.ExecContext(ctx, g.dialect.syncCommit); err != nil {
			return 0, fmt.Errorf("fence: resetting the fence of %q: %w", resource, err)
		}
	}
	ph := g.dialect.placeholder
	var newest int64
	err = tx.QueryRowContext(ctx, "SELECT fence FROM "+g.table+" WHERE resource = "+ph(1)+g.dialect.lockSuffix, resource).Scan(&newest)
	found := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("fence: reading the fence of %q in table %s: %w", resource, g.table, err)
	}
	var stmt string
	args := []any{resource}
	switch {
	case fence == 0:
		stmt = "DELETE FROM " + g.table + " WHERE resource = " + ph(1)
	case found:
		stmt = "UPDATE " + g.table + " SET fence = " + ph(1) + " WHERE resource = " + ph(2)
		args = []any{int64(fence), resource}
	default:
		stmt = "INSERT INTO " + g.table + " (resource, fence) VALUES (" + ph(1) + ", " + ph(2) + ")"
		args = append(args, int64(fence))
	}
	if _, err := tx.ExecContext(ctx, stmt, args...); err != nil {
		return 0, fmt.Errorf("fence: resetting the fence of %q in table %s: %w", resource, g.table, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("fence: committing the reset of the fence of %q: %w", resource, err)
	}
	previous = uint64(max(newest, 0))
	observeReset(g.observer, "SQL", resource, previous, fence)
	return previous, nil
}

func (s *sqlStore) Reset(ctx context.Context, resource string, fence uint64) (uint64, error) {
	return s.g.Reset(ctx, s.db, resource, fence)
}

// ResetFile records fence as the newest written to the file name, in
// name+FileSuffix, whatever was recorded, and returns what was (0 for
// nothing, or for a fence file that held no fence, which it replaces);
// fence 0 removes the fence file. It takes its turn on the lock file as
// WriteFile does, and refuses what WriteFile refuses. It is for an
// operator (see Resetter): a reset lets through any write with a fence
// from the new record up. It has no observer: the caller reports it.
func ResetFile(name string, fence uint64) (previous uint64, err error) {
	if err := checkReset(name, fence, maxResource); err != nil {
		return 0, err
	}
	record, lock, err := lockFile(name)
	if err != nil {
		return 0, err
	}
	defer lock.Close()
	mode := os.FileMode(0o644)
	f, err := openRegular(record, os.O_RDONLY, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return 0, fmt.Errorf("fence: reading the fence: %w", err)
	default:
		b, rerr := io.ReadAll(io.LimitReader(f, 64))
		fi, serr := f.Stat()
		f.Close()
		if rerr != nil || serr != nil {
			return 0, fmt.Errorf("fence: reading %s: %w", record, errors.Join(rerr, serr))
		}
		mode = fi.Mode().Perm()
		if s, ok := strings.CutSuffix(string(b), "\n"); ok {
			if n, err := strconv.ParseUint(s, 10, 64); err == nil && n <= math.MaxInt64 {
				previous = n
			}
		}
	}
	if fence == 0 {
		if err := os.Remove(record); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("fence: removing the fence of %s: %w", name, err)
		}
		return previous, nil
	}
	if err := replace(record, []byte(strconv.FormatUint(fence, 10)+"\n"), mode, "record"); err != nil {
		return 0, fmt.Errorf("fence: resetting the fence of %s to %d: %w", name, fence, err)
	}
	return previous, nil
}
