package pglock

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
)

// CheckFence records fence as the newest fence written to resource, in
// the caller's transaction tx, unless a higher one has already been
// written: then it returns a *fence.StaleError matching ErrStaleFence, and the caller
// must roll tx back so that nothing it wrote is kept. The same fence may
// write again: a holder writes as often as it likes under one lease.
//
// resource names what the writes touch (a row, a table, an account: any
// name valid for a lock); fence is the Fence of the lease under which the
// caller writes, from any dlock backend, so long as each resource is
// always fenced by the same lock. The fences live in the Client's fences
// table (see WithTable and SchemaSQL).
//
// CheckFence keeps the resource's row locked until tx ends, so writers of
// one resource take turns: once a holder's fence is recorded, a later
// holder's check waits for the earlier transaction to end, and a stale
// holder's check that comes after the later one's commit fails. Put the
// check first in the transaction, and the writes it guards after it.
func (c *Client) CheckFence(ctx context.Context, tx pgx.Tx, resource string, fence uint64) error {
	if err := c.checkFence(resource, fence); err != nil {
		return err
	}
	var recorded int64
	err := tx.QueryRow(ctx, c.sql.fence, resource, int64(fence)).Scan(&recorded)
	if !errors.Is(err, pgx.ErrNoRows) {
		if err != nil {
			return c.describe("checking the fence of", resource, err)
		}
		return nil
	}
	var newest int64
	if err := tx.QueryRow(ctx, "SELECT fence FROM "+c.obj.fences+" WHERE resource = $1", resource).Scan(&newest); err != nil {
		return fmt.Errorf("%w: resource %q: %w", ErrStaleFence, resource, c.describe("reading the fence of", resource, err))
	}
	return staleFence(resource, fence, uint64(newest))
}

// WriteFenced runs write in a new transaction of the Client's pool, after
// CheckFence(ctx, tx, resource, fence), and commits it if write returns
// nil. If the fence is stale it returns an error matching ErrStaleFence
// without calling write; if write returns an error, it returns that error.
// Either way it rolls back, and nothing is written.
//
// This is what a lock service alone cannot give: the check of the fence
// and the write it guards commit together, or not at all, in the database
// that holds the data.
func (c *Client) WriteFenced(ctx context.Context, resource string, fence uint64, write func(ctx context.Context, tx pgx.Tx) error) error {
	if err := c.checkFence(resource, fence); err != nil {
		return err
	}
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return c.describe("beginning a fenced write to", resource, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // after a Commit, it does nothing
	if err := c.CheckFence(ctx, tx, resource, fence); err != nil {
		return err
	}
	if err := write(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return c.describe("committing a fenced write to", resource, err)
	}
	return nil
}

// maxFence is the largest fence a grant may give: 2^53 - 1, the largest
// integer that JSON and JavaScript consumers read exactly. Fences follow
// the database's clock in microseconds, which reaches it in the year 2255.
const maxFence = 1<<53 - 1

// fenceOutOfRange returns the error of a grant of lock name whose fence
// is above maxFence; the grant is freed.
func (c *Client) fenceOutOfRange(name string, fence uint64) error {
	return fmt.Errorf("pglock: the database gave lock %q fence %d, above 2^53-1, which JSON and JavaScript cannot read exactly: check the database's clock, the sequence %s and the fences in table %s",
		name, fence, c.obj.sequence, c.obj.table)
}

// checkFence returns the error that CheckFence and WriteFenced fail with
// before they ask the database, if any.
func (c *Client) checkFence(resource string, fence uint64) error {
	if err := c.usable(); err != nil {
		return err
	}
	if err := checkName("resource", resource); err != nil {
		return err
	}
	if fence == 0 || fence > math.MaxInt64 {
		return fmt.Errorf("pglock: fence %d for %q is not one a lease gives: want 1 to 2^63-1", fence, resource)
	}
	return nil
}
