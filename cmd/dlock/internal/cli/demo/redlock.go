package demo

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/servers"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/dlock-go/dlock/redlock"
	"github.com/redis/go-redis/v9"
)

// Redlock settings of the demo. The restart window is the short TTL, so
// that a restarted node's wait is short enough to watch.
const (
	redlockTTL         = time.Second
	redlockNodeTimeout = 150 * time.Millisecond // generous, for loaded machines
)

// redlockRetry polls often, so that hand-overs are quick: a Redlock waiter
// has nothing to wake it but its next attempt.
var redlockRetry = dlock.ExponentialBackoff(5*time.Millisecond, 50*time.Millisecond)

// A redlockWorker is one worker's Redlock client, on connections of its
// own to every node.
type redlockWorker struct {
	rdbs   []*redis.Client
	client *redlock.Client
	mutex  *redlock.Mutex
}

func newRedlockWorker(nodes []*servers.Redis) *redlockWorker {
	w := &redlockWorker{}
	conns := make([]redislock.Conn, len(nodes))
	for i, n := range nodes {
		rdb := redisClient(n.Addr())
		w.rdbs = append(w.rdbs, rdb)
		conns[i] = goredisconn.New(rdb)
	}
	w.client = redlock.New(conns, redlock.WithNodeTimeout(redlockNodeTimeout), redlock.WithRestartWindow(redlockTTL))
	w.mutex = w.client.NewMutex("nightly-report", redlock.WithTTL(redlockTTL), redlock.WithRetry(redlockRetry))
	return w
}

func (w *redlockWorker) close() {
	w.client.Close()
	for _, rdb := range w.rdbs {
		rdb.Close()
	}
}

// redlockPart runs part 3: Redlock through a node's death and its return
// without its data.
func (d *demo) redlockPart(ctx context.Context) error {
	d.heading("3. Redlock over three nodes: one dies, comes back empty, and the lock goes on")
	names := []string{"A", "B", "C"}
	nodes := make([]*servers.Redis, len(names))
	for i := range nodes {
		srv, err := launchRedis()
		if err != nil {
			return err
		}
		defer srv.Close()
		nodes[i] = srv
	}
	for i, n := range nodes {
		d.out.printf("Node %s: redis-server on %s (pid %d, no persistence)\n", names[i], n.Addr(), n.PID())
	}
	d.out.printf("%d workers, each with its own connections to every node, take %q (TTL %v) and hold it %v.\n",
		d.o.Workers, "nightly-report", redlockTTL, workTime)
	d.out.printf("A grant needs a majority, 2 of 3 nodes. Fences come from the nodes' clocks, in microseconds.\n\n")

	b := newBoard(nil)
	d.redlock = b
	stopCtx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	var wg sync.WaitGroup
	defer wg.Wait() // before the nodes are closed
	start := time.Now()
	d.out.printf("%s  workers start\n", since(start, start))
	for w := 1; w <= d.o.Workers; w++ {
		rw := newRedlockWorker(nodes)
		wg.Go(func() {
			defer rw.close()
			b.contend(stopCtx, w, rw.mutex, 0, holdFor(workTime))
		})
	}
	// failed returns the first worker error, once the workers stopped.
	failed := func(err error) error {
		stopWorkers()
		wg.Wait()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if werr := b.err(); werr != nil {
			return werr
		}
		return err
	}
	perPhase := d.o.Workers * d.o.Rounds
	// grantsBy waits until there are n grants in all.
	grantsBy := func(n int) error {
		// A worker that fails stops granting: do not wait for it forever.
		return b.waitFor(stopCtx, func() bool { return len(b.grants) >= n || b.failed() })
	}
	phase := func(from int, what string) {
		s := b.stats(from)
		d.out.printf("%s  %d grants %s; hand-over median %s, longest %s\n",
			since(start, time.Now()), s.grants, what, ms(s.medHandover), ms(s.maxHandover))
	}

	// 1. All three nodes up.
	if err := grantsBy(1); err != nil {
		return failed(err)
	}
	first := b.grants[0]
	d.out.printf("%s  first grant: worker %d, fence %d. Nodes new to dlock, like nodes that lost their data,\n",
		since(start, first.at), first.worker, first.lease.Fence())
	d.out.printf("         sit out one TTL before they vote: a new deployment's first lock waits %v.\n", redlockTTL)
	if err := grantsBy(perPhase); err != nil {
		return failed(err)
	}
	phase(0, "with all three nodes up")

	// 2. Kill C while a worker holds the lock.
	if err := b.waitFor(stopCtx, func() bool { return b.holder != nil || b.failed() }); err != nil {
		return failed(err)
	}
	if err := nodes[2].Kill(); err != nil {
		return failed(err)
	}
	killed := time.Now()
	b.mu.Lock()
	holder, atKill, relErrs := b.holder, len(b.grants), len(b.releaseErr)
	b.mu.Unlock()
	who := "no worker held the lock at that moment"
	if holder != nil && holder.at.Before(killed) {
		who = fmt.Sprintf("worker %d held the lock (fence %d) and keeps it: its lease needs only A and B", holder.worker, holder.lease.Fence())
	}
	d.out.printf("%s  node C %s killed (kill -9); %s\n", since(start, killed), nodes[2].Addr(), who)
	if err := grantsBy(atKill + perPhase); err != nil {
		return failed(err)
	}
	phase(atKill, "on A and B alone, still a majority")
	b.mu.Lock()
	partial := b.releaseErr[relErrs:]
	b.mu.Unlock()
	if len(partial) > 0 {
		d.out.printf("         %d releases reached A and B but not C, and said so with a redlock.NodeError:\n         %v\n",
			len(partial), partial[0])
	}

	// 3. C comes back empty; B is paused, so only A and C can vote.
	if err := nodes[2].Restart(); err != nil {
		return failed(fmt.Errorf("%w: restarting node C: %w", errUnavailable, err))
	}
	d.out.printf("%s  node C restarted on the same port, empty: it forgot the lock, its fence counter and its epoch\n",
		since(start, time.Now()))
	if err := nodes[1].Pause(); err != nil {
		return failed(err)
	}
	paused := time.Now()
	b.mu.Lock()
	atPause := len(b.grants)
	b.mu.Unlock()
	d.out.printf("%s  node B paused (SIGSTOP). A alone is no majority, and C, having lost its data, takes the key\n", since(start, paused))
	d.out.printf("         but does not vote until it has run for the restart window, %v. Without that, C could vote for a second\n", redlockTTL)
	d.out.printf("         holder while a lease it had granted before it died was still valid on A.\n")
	// An attempt B answered just before it stopped may still complete: the
	// stall ends with the first grant that came later.
	var after grant
	if err := b.waitFor(stopCtx, func() bool {
		for _, g := range b.grants[atPause:] {
			if g.at.After(paused.Add(5 * time.Millisecond)) {
				after = g
				return true
			}
		}
		return b.failed()
	}); err != nil {
		return failed(err)
	}
	if created, err := epochCreated(nodes[2]); err == nil {
		d.out.printf("         (C's new epoch dates from %s: the first acquire that reached it after the restart made it)\n",
			strings.TrimSpace(since(start, created)))
	}
	d.redlockStall = after.at.Sub(paused)
	d.out.printf("%s  granted again, %.2fs after B stopped: worker %d, fence %d, on the votes of A and C\n",
		since(start, after.at), d.redlockStall.Seconds(), after.worker, after.lease.Fence())
	if err := nodes[1].Resume(); err != nil {
		return failed(err)
	}
	b.mu.Lock()
	atResume := len(b.grants)
	b.mu.Unlock()
	d.out.printf("%s  node B resumed (SIGCONT)\n", since(start, time.Now()))

	// 4. All three again.
	if err := grantsBy(atResume + perPhase); err != nil {
		return failed(err)
	}
	phase(atResume, "with all three nodes up again")
	if err := failed(nil); err != nil {
		return err
	}
	d.redlockHandover = maxHandover(b, atPause, atResume)

	s := b.stats(0)
	d.out.printf("\n%d grants. %s\n", s.grants, b.verdict())
	b.mu.Lock()
	lost := b.lost
	b.mu.Unlock()
	if len(lost) == 0 {
		d.out.printf("No lease was lost: every holder released a lease it still held.\n")
	} else {
		d.out.printf("%d lease(s) ran out before their release, and their holders were told on Done(), e.g. %v\n", len(lost), lost[0])
	}
	return nil
}

// maxHandover returns the longest hand-over of b's grants other than those
// from skipFrom up to skipTo.
func maxHandover(b *board, skipFrom, skipTo int) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	var longest time.Duration
	for i, g := range b.grants {
		if i < skipFrom || i >= skipTo {
			longest = max(longest, g.handover)
		}
	}
	return longest
}

// epochCreated returns when a node's dlock epoch was created, by its own
// clock.
func epochCreated(n *servers.Redis) (time.Time, error) {
	v, err := n.Do("HGET", "dlock:epoch", "created")
	if err != nil {
		return time.Time{}, err
	}
	msec, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("epoch created %q: %w", v, err)
	}
	return time.UnixMilli(msec), nil
}
