package interop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/redis/go-redis/v9"
)

// ttl is every side's lease time: long enough that no lock here expires
// while its holder is still in its critical section, however loaded the
// machine, and short enough that a waiter that only noticed the other
// side's release when the key expired shows up plainly.
const ttl = 2 * time.Second

// A peer is one holder of a lock on one key, through one library: dlock's
// or another's. A peer holds at most one lease at a time.
type peer interface {
	// try makes one attempt: true if it now holds the lock.
	try(ctx context.Context) (bool, error)
	// lock waits until it holds the lock, and returns when it got it.
	lock(ctx context.Context) (time.Time, error)
	// unlock releases the lock it holds, and returns when the release
	// had returned.
	unlock(ctx context.Context) (time.Time, error)
	// count takes and releases the lock n times, each time incrementing
	// the shared counter the non-atomic way (see critical), and returns
	// how many times it did.
	count(ctx context.Context, n int) (int, error)
	// close ends the peer.
	close()
}

// The shared resource: counterKey is incremented by GET, a pause, SET;
// insideKey counts the holders in their critical section, and overlapKey
// the times a holder found another there. Every peer's count, in every
// language, runs this same critical section (see testdata).
func counterKeys(key string) (counterKey, insideKey, overlapKey string) {
	return "interop:counter:" + key, "interop:inside:" + key, "interop:overlaps:" + key
}

// critical is one turn in the critical section, for the Go peers.
func critical(ctx context.Context, rdb *redis.Client, key string) error {
	counter, inside, overlaps := counterKeys(key)
	n, err := rdb.Incr(ctx, inside).Result()
	if err != nil {
		return err
	}
	if n != 1 {
		rdb.Incr(ctx, overlaps)
	}
	v, err := rdb.Get(ctx, counter).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	time.Sleep(time.Millisecond)
	if err := rdb.Set(ctx, counter, v+1, 0).Err(); err != nil {
		return err
	}
	return rdb.Decr(ctx, inside).Err()
}

// countWith runs n turns of the critical section under lock and unlock.
func countWith(ctx context.Context, rdb *redis.Client, key string, n int, lock func(context.Context) error, unlock func(context.Context) error) (int, error) {
	done := 0
	for range n {
		if err := lock(ctx); err != nil {
			return done, fmt.Errorf("lock after %d turns: %w", done, err)
		}
		err := critical(ctx, rdb, key)
		if uerr := unlock(ctx); err == nil {
			err = uerr
		}
		if err != nil {
			return done, err
		}
		done++
	}
	return done, nil
}

// dlockPeer is a peer on a dlock Locker made with WithBareKey.
type dlockPeer struct {
	l    dlock.Locker
	rdb  *redis.Client // for the critical section
	key  string
	held dlock.Lease
}

func (p *dlockPeer) try(ctx context.Context) (bool, error) {
	l, err := p.l.TryLock(ctx)
	if errors.Is(err, dlock.ErrNotObtained) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	p.held = l
	return true, nil
}

func (p *dlockPeer) lock(ctx context.Context) (time.Time, error) {
	l, err := p.l.Lock(ctx)
	if err != nil {
		return time.Time{}, err
	}
	p.held = l
	return time.Now(), nil
}

func (p *dlockPeer) unlock(ctx context.Context) (time.Time, error) {
	err := p.held.Release(ctx)
	p.held = nil
	return time.Now(), err
}

func (p *dlockPeer) count(ctx context.Context, n int) (int, error) {
	var last uint64
	return countWith(ctx, p.rdb, p.key, n, func(ctx context.Context) error {
		_, err := p.lock(ctx)
		if err == nil {
			if f := p.held.Fence(); f <= last {
				return fmt.Errorf("fence %d after %d", f, last)
			} else {
				last = f
			}
		}
		return err
	}, func(ctx context.Context) error {
		_, err := p.unlock(ctx)
		return err
	})
}

func (p *dlockPeer) close() {}

// A pair is dlock's side and another library's on one key: newDlock and
// newOther make a new peer of each (each on its own connection, as
// another process would be).
type pair struct {
	key      string
	rdb      *redis.Client // for the counter keys and checks
	newDlock func(t *testing.T) peer
	newOther func(t *testing.T) peer
	// token returns the value the lock key holds while dlock's peer p
	// holds it; values returns the key's value on each node.
	token  func(p peer) string
	values func(ctx context.Context) []string
}

// turns is how many times each of the four workers of a pair (two per
// side) takes the lock in runCounter.
const turns = 100

// runPair runs every check of one pairing.
func runPair(t *testing.T, p pair) {
	t.Run("Counter", func(t *testing.T) { runCounter(t, p) })
	t.Run("TryLockBothWays", func(t *testing.T) { runTryLock(t, p) })
	t.Run("Takeover", func(t *testing.T) { runTakeover(t, p) })
}

// runCounter: two workers of each side increment the shared counter the
// non-atomic way: no overlap, no lost update.
func runCounter(t *testing.T, p pair) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	counter, inside, overlaps := counterKeys(p.key)
	p.rdb.Del(ctx, counter, inside, overlaps)
	peers := []peer{p.newDlock(t), p.newDlock(t), p.newOther(t), p.newOther(t)}
	got := make([]int, len(peers))
	errs := make([]error, len(peers))
	start := time.Now()
	var wg sync.WaitGroup
	for i, pr := range peers {
		wg.Go(func() { got[i], errs[i] = pr.count(ctx, turns) })
	}
	wg.Wait()
	took := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("count: %v (turns %v)", err, got)
	}
	total := 0
	for _, n := range got {
		total += n
	}
	c, _ := p.rdb.Get(ctx, counter).Int()
	o, _ := p.rdb.Get(ctx, overlaps).Int()
	t.Logf("%d acquisitions (dlock %d+%d, other %d+%d) in %v: counter %d, overlaps %d", total, got[0], got[1], got[2], got[3], took.Round(time.Millisecond), c, o)
	if o != 0 || c != total || total != len(peers)*turns {
		t.Fatalf("%d acquisitions, counter %d, %d overlaps: the two libraries did not exclude each other", total, c, o)
	}
	// A Redlock release returns once a majority deleted the key, and
	// finishes on the other nodes in the background, as a failed attempt
	// does: give that a second, far less than the TTL.
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		left := slices.DeleteFunc(p.values(ctx), func(v string) bool { return v == "" })
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lock key holds %q a second after every worker released it", left)
		}
	}
}

// runTryLock: while one side holds the key, the other's TryLock is
// refused, both ways; the key dlock holds is the bare key with its token;
// and, so that this check is not vacuous, dlock's own layout (no
// WithBareKey) is not refused, and neither is a neighbouring key.
func runTryLock(t *testing.T, p pair) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, o := p.newDlock(t), p.newOther(t)
	mustTry(t, ctx, d, true, "dlock, the key free")
	// On a majority of the nodes (a Redlock grant returns once a majority
	// voted; the others may still be on their way), and nothing else.
	vals, held := p.values(ctx), 0
	for i, v := range vals {
		if v == p.token(d) {
			held++
		} else if v != "" {
			t.Fatalf("node %d: the bare key %q holds %q while dlock holds it; want its token %q", i, p.key, v, p.token(d))
		}
	}
	if held < len(vals)/2+1 {
		t.Fatalf("the bare key %q holds dlock's token on %d of %d nodes (%q); want a majority", p.key, held, len(vals), vals)
	}
	mustTry(t, ctx, o, false, "the other library, dlock holding")
	mustUnlock(t, ctx, d)
	mustTry(t, ctx, o, true, "the other library, the key free")
	mustTry(t, ctx, d, false, "dlock, the other library holding")
	mustUnlock(t, ctx, o)
}

// runTakeover: a waiting Lock on each side takes over soon after the other
// side's release (well before the released key would have expired); the
// delays are logged.
func runTakeover(t *testing.T, p pair) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, o := p.newDlock(t), p.newOther(t)
	const rounds = 8
	measure := func(holder, waiter peer) []time.Duration {
		var delays []time.Duration
		for range rounds {
			if _, err := holder.lock(ctx); err != nil {
				t.Fatal(err)
			}
			got := make(chan time.Time, 1)
			errc := make(chan error, 1)
			go func() {
				at, err := waiter.lock(ctx)
				got <- at
				errc <- err
			}()
			time.Sleep(150 * time.Millisecond) // the waiter is waiting by now
			sent := time.Now()
			released, err := holder.unlock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			at := <-got
			if err := <-errc; err != nil {
				t.Fatalf("the waiter's Lock: %v", err)
			}
			// The waiter may be granted before the holder's process has
			// told of its release's return (2.2ms before, a loaded fresh
			// clone with redis-py), never before the release was asked for.
			if at.Before(sent) {
				t.Fatalf("the waiter got the lock %v before the holder's release was asked for", sent.Sub(at))
			}
			delays = append(delays, max(at.Sub(released), 0))
			if _, err := waiter.unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return delays
	}
	for _, dir := range []struct {
		name           string
		holder, waiter peer
	}{{"dlock waits for the other library", o, d}, {"the other library waits for dlock", d, o}} {
		delays := measure(dir.holder, dir.waiter)
		slices.Sort(delays)
		t.Logf("%s: takeover delay median %v, max %v (%d rounds)", dir.name, delays[len(delays)/2].Round(100*time.Microsecond),
			delays[len(delays)-1].Round(100*time.Microsecond), len(delays))
		if max := delays[len(delays)-1]; max > ttl/2 {
			t.Errorf("%s: a takeover took %v; a waiter that polls takes over well within the TTL %v", dir.name, max, ttl)
		}
	}
}

func mustTry(t *testing.T, ctx context.Context, p peer, want bool, what string) {
	t.Helper()
	ok, err := p.try(ctx)
	if err != nil {
		t.Fatalf("%s: TryLock: %v", what, err)
	}
	if ok != want {
		t.Fatalf("%s: TryLock obtained=%v; want %v", what, ok, want)
	}
}

func mustUnlock(t *testing.T, ctx context.Context, p peer) {
	t.Helper()
	if _, err := p.unlock(ctx); err != nil {
		t.Fatalf("unlock: %v", err)
	}
}

// atoi reads an integer reply, 0 if it is none.
func atoi(s string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return n
}
