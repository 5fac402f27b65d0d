package redislock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/redislock"
)

// ReentrantMutex's suite runs on one transport, rueidis (FairMutex's on
// go-redis): the reentrant scripts and holds differ from the Mutex's above
// redislock.Conn, and the Mutex suite covers both transports (see
// TestIntegrationConformanceStandalone).
func TestIntegrationReentrantConformance(t *testing.T) {
	if !apart(t) {
		dlocktest.Run(t, kindBackend(standalone(t), rueidisClient, func(c *redislock.Client, key string, opts ...redislock.Option) dlock.Locker {
			return c.NewReentrantMutex(key, opts...)
		}))
	}
}

// menu is a node of the menu tree from the design notes: building the tree
// walks it recursively, and every level takes the same lock.
type menu struct {
	name     string
	children []*menu
}

func chain(depth int) *menu {
	root := &menu{name: "level 0"}
	for n, i := root, 1; i < depth; i++ {
		child := &menu{name: fmt.Sprintf("level %d", i)}
		n.children = []*menu{child}
		n = child
	}
	return root
}

// walk visits the tree under the lock, taking it again at every level
// through the holding lease's context.
func walk(ctx context.Context, l dlock.Locker, m *menu, visit func(string, dlock.Lease)) error {
	lease, err := l.TryLock(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", m.name, err)
	}
	defer lease.Release(context.Background())
	visit(m.name, lease)
	for _, c := range m.children {
		if err := walk(lease.Context(), l, c, visit); err != nil {
			return err
		}
	}
	return nil
}

// The seed's recursive menu tree: with a plain lock only the first level
// runs (the second cannot take the lock its caller holds); with a reentrant
// lock every level runs, and the lock is free again afterwards.
func TestIntegrationReentrantRecursiveMenuTree(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	const depth = 12
	c := newClient(t, d, goRedis)

	var visited []string
	err := walk(ctx, c.NewMutex("menu-plain"), chain(depth), func(name string, _ dlock.Lease) { visited = append(visited, name) })
	if !errors.Is(err, redislock.ErrNotReentrant) || len(visited) != 1 {
		t.Fatalf("plain Mutex: visited %d levels, err %v; want 1 level and ErrNotReentrant", len(visited), err)
	}

	visited = visited[:0]
	var fences []uint64
	maxHolds := ""
	lock := c.NewReentrantMutex("menu")
	err = walk(ctx, lock, chain(depth), func(name string, lease dlock.Lease) {
		visited = append(visited, name)
		fences = append(fences, lease.Fence())
		maxHolds, _ = d.servers[0].Do("HGET", lockKey("menu"), "o:"+sha1hex(lease.Token()))
	})
	if err != nil || len(visited) != depth {
		t.Fatalf("ReentrantMutex: visited %d of %d levels, err %v", len(visited), depth, err)
	}
	if maxHolds != fmt.Sprint(depth) {
		t.Errorf("hold count at the deepest level = %q; want %d", maxHolds, depth)
	}
	for _, f := range fences {
		if f != fences[0] {
			t.Errorf("holds of one owner have fences %v; want one fence", fences)
			break
		}
	}
	if out, _ := d.servers[0].Do("EXISTS", lockKey("menu")); out != "0" {
		t.Error("the lock key remained after every hold was released")
	}
	next, err := newClient(t, d, goRedis).NewReentrantMutex("menu").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next.Fence() <= fences[0] {
		t.Errorf("next owner's fence %d after %d", next.Fence(), fences[0])
	}
	next.Release(ctx)
}

// A re-entry is one round trip and does not wait; inner releases keep the
// lock held; only the last one frees it and wakes a waiter.
func TestIntegrationReentrantHoldsAndRelease(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	counter := &countingConn{Conn: goRedis(t, d)}
	c := redislock.New(counter)
	t.Cleanup(func() { c.Close() })
	lock := c.NewReentrantMutex("holds")
	other := newClient(t, d, goRedis).NewReentrantMutex("holds")

	outer, err := lock.Lock(dlock.WithOwner(ctx, "job-42"))
	if err != nil {
		t.Fatal(err)
	}
	before := counter.evals.Load()
	inner, err := lock.Lock(outer.Context())
	if err != nil {
		t.Fatal(err)
	}
	if trips := counter.evals.Load() - before; trips != 1 {
		t.Errorf("re-entry took %d round trips; want 1", trips)
	}
	if inner.Token() != "job-42" || outer.Token() != "job-42" {
		t.Errorf("tokens %q, %q; want the owner", outer.Token(), inner.Token())
	}
	woke := make(chan error, 1)
	go func() {
		l, err := other.Lock(ctx)
		if err == nil {
			l.Release(ctx)
		}
		woke <- err
	}()
	if err := inner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		t.Fatalf("another owner got the lock while one hold remained (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Second):
		t.Fatal("the waiter was not woken by the last release")
	}
}

// Another owner's stale lease cannot release the current holder's lock.
func TestIntegrationReentrantOtherOwnerRefused(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	ttl := 200 * time.Millisecond
	stale, err := newClient(t, d, goRedis).NewReentrantMutex("owners", redislock.WithTTL(ttl), redislock.WithoutRenewal()).Lock(dlock.WithOwner(ctx, "a"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl + 50*time.Millisecond)
	cur, err := newClient(t, d, goRedis).NewReentrantMutex("owners").Lock(dlock.WithOwner(ctx, "b"))
	if err != nil {
		t.Fatal(err)
	}
	if err := stale.Release(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("a stale owner's Release = %v; want ErrNotHeld", err)
	}
	if out, _ := d.servers[0].Do("HGET", lockKey("owners"), "o:"+sha1hex("b")); out != "1" {
		t.Errorf("the current owner's hold count is %q after a stale Release; want 1", out)
	}
	cur.Release(ctx)
}

func TestIntegrationMutexAndReentrantNameClash(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	c := newClient(t, d, goRedis)
	l, err := c.NewMutex("clash").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	_, err = c.NewReentrantMutex("clash").TryLock(ctx)
	if err == nil || !strings.Contains(err.Error(), "held by a Mutex") {
		t.Fatalf("ReentrantMutex on a Mutex's name = %v; want an error naming the Mutex", err)
	}
}

// Re-entering with a shorter TTL, and renewing that hold, never shortens
// the lock's expiry below what the outer hold was promised: another owner
// stays out for as long as the outer lease is valid.
func TestIntegrationReentryWithShorterTTLKeepsOuterExpiry(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, time.Minute)
	c := newClient(t, d, goRedis)
	name := "reentry-shorter"
	outer, err := c.NewReentrantMutex(name, redislock.WithTTL(30*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Release(ctx)
	short := time.Second
	inner, err := c.NewReentrantMutex(name, redislock.WithTTL(short)).Lock(outer.Context())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(short) // the inner hold renews (every TTL/3) with its 1s TTL
	if err := inner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	pttl, err := d.admin(t).PTTL(ctx, lockKey(name)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(outer.Until()); pttl < left {
		t.Errorf("the key expires in %v, before the outer lease's Until (%v away)", pttl, left)
	}
	time.Sleep(short + short/2)
	other := newClient(t, d, goRedis).NewReentrantMutex(name)
	if l, err := other.TryLock(ctx); err == nil {
		l.Release(ctx)
		t.Fatalf("another owner took the lock %v after a 1s re-entry, while the outer lease is valid for %v more", 2*short+short/2, time.Until(outer.Until()))
	}
}

// The owner that Inspect shows cannot join the hold: only the owner's own
// token can, and the server does not keep it.
func TestIntegrationReentrantShownOwnerCannotJoin(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	c := newClient(t, d, goRedis)
	lease, err := c.NewReentrantMutex("secret-owner").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Inspect(ctx, "secret-owner")
	if err != nil || len(info.Holders) != 1 {
		t.Fatalf("Inspect = %+v, %v", info, err)
	}
	shown := info.Holders[0].Owner
	if strings.Contains(shown, lease.Token()) {
		t.Fatalf("Inspect shows the owner token %q", shown)
	}
	stranger := newClient(t, d, goRedis).NewReentrantMutex("secret-owner")
	if l, err := stranger.TryLock(dlock.WithOwner(ctx, shown)); !errors.Is(err, dlock.ErrNotObtained) {
		t.Errorf("a client with the shown owner %q joined the hold: %v, %v", shown, l, err)
	}
	keys, _ := d.admin(t).HKeys(ctx, "dlock:{secret-owner}").Result()
	for _, k := range keys {
		if strings.Contains(k, lease.Token()) {
			t.Errorf("the server keeps the owner token in field %q", k)
		}
	}
	inner, err := stranger.TryLock(dlock.WithOwner(ctx, lease.Token()))
	if err != nil {
		t.Fatalf("the owner's own token did not re-enter: %v", err)
	}
	inner.Release(ctx)
	lease.Release(ctx)
}

// sha1hex is how the server stores a reentrant owner's token.
func sha1hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
