package fence_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/internal/rediskeys"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// hashTag returns the part of key that Redis Cluster hashes.
func hashTag(key string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			return key[open+1 : open+1+end]
		}
	}
	return key
}

// RedisKey is injective: no two keys share a fence key, "acct" and
// "{acct}" included, and each fence key is on its key's Cluster slot.
// The keys that did not collide keep the fence keys of earlier versions,
// so that deployments keep their fences.
func TestRedisKeyInjective(t *testing.T) {
	keys := []string{"acct", "{acct}", "{acct}:x", "x{acct}", "a{b", "{a{b}", "{a{b}}", "{{a}", "{a}{b}", "{}", "{}x",
		"x{}{y}", "{x}y", "guard:{acct}", "dlock:guard:{acct}x", "é{ü}", "a b", "{a b}"}
	seen := map[string]string{}
	for _, k := range keys {
		fk, err := fence.RedisKey(k)
		if err != nil {
			if strings.ContainsRune(k, '}') && hashTag(k) == k {
				continue // a '}' without a hash tag: refused
			}
			if strings.HasPrefix(k, "dlock:") {
				continue
			}
			t.Errorf("RedisKey(%q): %v", k, err)
			continue
		}
		if other, ok := seen[fk]; ok {
			t.Errorf("RedisKey(%q) = RedisKey(%q) = %q: the two would share a fence", k, other, fk)
		}
		seen[fk] = k
		if rediskeys.Slot(hashTag(fk)) != rediskeys.Slot(hashTag(k)) {
			t.Errorf("RedisKey(%q) = %q is on slot %d, not the key's %d", k, fk, rediskeys.Slot(hashTag(fk)), rediskeys.Slot(hashTag(k)))
		}
	}
	// The fence keys of earlier versions, for keys that did not collide.
	for key, want := range map[string]string{"acct": "dlock:guard:{acct}", "x{t}y": "dlock:guard:x{t}y", "a{b": "dlock:guard:{a{b}", "{acct}:x": "dlock:guard:{acct}:x"} {
		if got, err := fence.RedisKey(key); err != nil || got != want {
			t.Errorf("RedisKey(%q) = %q, %v; want %q, as before", key, got, err, want)
		}
	}
}

// The keys dlock itself writes, the guard's fences and the locks' keys
// and fence counters, are refused as keys to write: a Set of
// "dlock:guard:{k}" would lower the fence of k, and one of a lock's fence
// counter would let its next grants repeat fences. Check and a Store's
// Advance, which write only the fence key, refuse the guard's own keys:
// their fence keys are where those of keys all one hash tag are kept.
func TestIntegrationRedisOwnNamespace(t *testing.T) {
	srv := sharedRedis(t)
	g := fence.NewRedis(goredisconn.New(redis.NewClient(&redis.Options{Addr: srv.Addr()})))
	ctx := ctxFor(t, 10*time.Second)
	lock := rediskeys.For(unique("acct"))
	if _, err := srv.Do("SET", lock.Fence, "1000"); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"dlock:guard:{acct}", lock.Fence, lock.Base, "dlock:x"} {
		calls := map[string]error{
			"Set":  g.Set(ctx, key, 1, "1"),
			"HSet": g.HSet(ctx, key, 1, "f", "1"),
		}
		if strings.HasPrefix(key, "dlock:guard:") {
			calls["Check"] = g.Check(ctx, key, 1)
			calls["Advance"] = g.Store().Advance(ctx, key, 1)
		}
		for name, err := range calls {
			if err == nil || !strings.Contains(err.Error(), "dlock:") || errors.Is(err, fence.ErrStale) {
				t.Errorf("%s of %q: %v; want an error naming dlock's prefix", name, key, err)
			}
		}
	}
	if v, _ := srv.Do("GET", lock.Fence); v != "1000" {
		t.Errorf("the lock's fence counter %s holds %q; want 1000", lock.Fence, v)
	}
}

// "acct" and "{acct}" do not share a fence: once each has written, a
// higher fence written to one does not make a write to the other stale.
// A key all one hash tag, whose fence an earlier version kept in the key
// of the key inside the braces, starts from that fence: upgrading loses
// none (and so, until "{acct}" first writes, a fence of "acct" counts as
// its newest: a refusal, never a stale write let through).
func TestIntegrationRedisTagKeysApart(t *testing.T) {
	srv := sharedRedis(t)
	g := fence.NewRedis(goredisconn.New(redis.NewClient(&redis.Options{Addr: srv.Addr()})))
	ctx := ctxFor(t, 10*time.Second)
	acct := unique("acct")
	for _, w := range []struct {
		key   string
		fence uint64
	}{{acct, 100}, {"{" + acct + "}", 100}, {acct, 150}, {"{" + acct + "}", 120}, {"{" + acct + "}", 200}, {acct, 160}} {
		if err := g.Set(ctx, w.key, w.fence, "v"); err != nil {
			t.Errorf("Set of %s with fence %d: %v; want nil: %s and {%s} each have a fence of their own", w.key, w.fence, err, acct, acct)
		}
	}

	// An earlier version's fence of {old}, kept in dlock:guard:{old}.
	old := unique("old")
	if _, err := srv.Do("SET", "dlock:guard:{"+old+"}", "200"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		fence uint64
		stale bool
	}{{150, true}, {200, false}, {199, true}, {201, false}} {
		if err := g.Set(ctx, "{"+old+"}", c.fence, "v"); c.stale != errors.Is(err, fence.ErrStale) || !c.stale && err != nil {
			t.Errorf("Set of {%s} with fence %d, after an earlier version recorded 200: %v; want stale %v", old, c.fence, err, c.stale)
		}
	}
}

// A reset of a key all one hash tag to 0 forgets its fence for good: the
// fence an earlier version kept for it is not read again. Reset works on
// a server that does not persist every write, which the guard's writes
// refuse.
func TestIntegrationRedisResetTagKey(t *testing.T) {
	srv := sharedRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	g := fence.NewRedis(goredisconn.New(rdb))
	ctx := ctxFor(t, 10*time.Second)
	old := unique("old")
	if _, err := srv.Do("SET", "dlock:guard:{"+old+"}", "200"); err != nil {
		t.Fatal(err)
	}
	if prev, err := g.Reset(ctx, "{"+old+"}", 0); err != nil || prev != 200 {
		t.Fatalf("Reset of {%s} to 0: %d, %v; want 200, the earlier version's", old, prev, err)
	}
	if err := g.Set(ctx, "{"+old+"}", 5, "v"); err != nil {
		t.Errorf("Set of {%s} with fence 5 after a reset to 0: %v", old, err)
	}
	if err := g.Set(ctx, old, 150, "v"); !errors.Is(err, fence.ErrStale) {
		t.Errorf("Set of %s with 150: %v; want ErrStale (its own fence is 200)", old, err)
	}
	if _, err := g.Reset(ctx, "dlock:guard:{x}", 1); err == nil {
		t.Error("Reset of a guard key: no error")
	}

	lazy := testenv.StartRedis(t, testenv.RedisConfig{})
	lrdb := redis.NewClient(&redis.Options{Addr: lazy.Addr()})
	t.Cleanup(func() { lrdb.Close() })
	lg := fence.NewRedis(goredisconn.New(lrdb))
	if err := lg.Check(ctx, "k", 5); !errors.Is(err, fence.ErrNotPersistent) {
		t.Fatalf("Check on a server without persistence: %v; want ErrNotPersistent", err)
	}
	if _, err := lg.Reset(ctx, "k", 5); err != nil {
		t.Errorf("Reset on a server without persistence: %v", err)
	}
}
