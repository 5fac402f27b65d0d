package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/dlock-go/dlock/dlocktest"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/rediskeys"
	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// WithBareKey is refused, by every call, by the kinds that cannot use the
// layout, and bad keys are named; no server is needed.
func TestBareKeyRefusals(t *testing.T) {
	ctx := context.Background()
	c := redislock.New(goredisconn.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})))
	bare := redislock.WithBareKey()
	kinds := []struct {
		name string
		l    dlock.Locker
	}{
		{"a FairMutex", c.NewFairMutex("k", bare)},
		{"an RWMutex", c.NewRWMutex("k", bare).Reader()},
		{"an RWMutex", c.NewRWMutex("k", bare).Writer()},
		{"a Semaphore", c.NewSemaphore("k", 2, bare)},
		{"a ReentrantMutex", c.NewReentrantMutex("k", bare)},
	}
	for _, k := range kinds {
		for _, op := range []func(context.Context) (dlock.Lease, error){k.l.TryLock, k.l.Lock} {
			l, err := op(ctx)
			if l != nil || !errors.Is(err, redislock.ErrBareKeyUnsupported) || !strings.Contains(err.Error(), k.name+" cannot use the bare-key layout") {
				t.Errorf("%s WithBareKey: got %v, %v; want an error matching ErrBareKeyUnsupported naming the kind", k.name, l, err)
			}
		}
	}
	if _, err := c.NewElection("k", bare).Campaign(ctx, "v"); !errors.Is(err, redislock.ErrBareKeyUnsupported) {
		t.Errorf("NewElection WithBareKey: Campaign returned %v; want ErrBareKeyUnsupported", err)
	}
	for _, tt := range []struct{ key, want string }{
		{"", "WithBareKey: empty key"},
		{"dlock:{x}", `starts with "dlock:"`},
		{"a\xffb", "not valid UTF-8"},
		{strings.Repeat("k", 4097), "4097 bytes long"},
	} {
		for _, op := range []func(context.Context) (dlock.Lease, error){c.NewMutex(tt.key, bare).TryLock, c.NewMutex(tt.key, bare).Lock} {
			if l, err := op(ctx); l != nil || err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("key %.20q: got %v, %v; want an error mentioning %q", tt.key, l, err, tt.want)
			}
		}
	}
	// Striped's mutexes are bare mutexes on name:i.
	if got := c.NewStriped("{s}", 2, bare).For("id").Name(); got != "{s}:0" && got != "{s}:1" {
		t.Errorf("a bare stripe is called %q", got)
	}
	if _, err := c.NewStriped("{s}", 2, bare, redislock.WithRetry(dlock.NoRetry())).For("id").TryLock(ctx); err == nil || strings.Contains(err.Error(), "brace") {
		t.Errorf("bare stripe: %v; want only the unreachable server's error", err)
	}
	// Braces are a Cluster hash tag, not an error, in a bare key.
	if _, err := c.NewMutex("{user}:7", bare, redislock.WithRetry(dlock.NoRetry())).TryLock(ctx); err == nil || strings.Contains(err.Error(), "brace") {
		t.Errorf("key with a hash tag: %v; want only the unreachable server's error", err)
	}
}

// The layout on the server: the key itself holds the lease's token alone
// with the TTL, nothing is written to another owner's value, a key without
// an expiry or of another type is not taken, and nothing is left behind
// but the slot's fence counter. On a Cluster, the acquire (the key and its
// slot's counter) runs on one node, for keys with and without a hash tag.
func TestIntegrationBareKeyLayout(t *testing.T) {
	t.Parallel()
	for _, top := range []struct {
		name string
		d    func(testing.TB) *deployment
	}{{"standalone", standalone}, {"cluster", cluster}} {
		t.Run(top.name, func(t *testing.T) {
			d := top.d(t)
			for _, tr := range transports {
				t.Run(tr.name, func(t *testing.T) {
					testBareKeyLayout(t, d, tr.open)
					testBareKeyTags(t, d, tr.open)
				})
			}
		})
	}
}

func testBareKeyLayout(t *testing.T, d *deployment, open opener) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := d.admin(t)
	c := newClient(t, d, open)
	for _, key := range []string{"bare:" + t.Name(), "{bare}:" + t.Name()} {
		m := c.NewMutex(key, redislock.WithBareKey(), redislock.WithTTL(2*time.Second))
		l, err := m.TryLock(ctx)
		if err != nil {
			t.Fatalf("%s: TryLock: %v", key, err)
		}
		if v, err := admin.Get(ctx, key).Result(); err != nil || v != l.Token() {
			t.Fatalf("%s holds %q (%v); want the token %q alone", key, v, err, l.Token())
		}
		if pttl, _ := admin.PTTL(ctx, key).Result(); pttl <= 0 || pttl > 2*time.Second {
			t.Fatalf("%s: PTTL %v; want the TTL", key, pttl)
		}
		if n, _ := admin.Exists(ctx, "dlock:{"+key+"}").Result(); n != 0 && !strings.Contains(key, "{") {
			t.Fatalf("dlock's own layout key exists beside the bare key")
		}
		// A second dlock owner waits; its failed attempts must not touch
		// the holder's value.
		other := newClient(t, d, open).NewMutex(key, redislock.WithBareKey())
		if _, err := other.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
			t.Fatalf("%s: second TryLock: %v; want ErrNotObtained", key, err)
		}
		if v, _ := admin.Get(ctx, key).Result(); v != l.Token() {
			t.Fatalf("%s: a failed attempt changed the holder's value to %q", key, v)
		}
		if ok, _ := admin.SetNX(ctx, key, "foreign", time.Second).Result(); ok {
			t.Fatalf("%s: SET NX by another library succeeded while dlock holds it", key)
		}
		fence := l.Fence()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n, _ := admin.Exists(ctx, key).Result(); n != 0 {
			t.Fatalf("%s: key still there after Release", key)
		}
		// A foreign holder, with and without an expiry.
		admin.Set(ctx, key, "foreign-token", 0)
		if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
			t.Fatalf("%s without expiry: TryLock: %v; want ErrNotObtained", key, err)
		}
		// Lock polls such a holder (no expiry is no reason to spin).
		wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		calls := totalCommands(t, d)
		_, err = m.Lock(wctx)
		wcancel()
		if !errors.Is(err, dlock.ErrNotObtained) {
			t.Fatalf("%s: Lock: %v; want ErrNotObtained after the ctx", key, err)
		}
		// A poll every 8-64ms is at most 38 attempts of a few commands
		// each (those inside the script count), plus what the client
		// sends on its own (a Cluster client's slot reloads, INFO here);
		// a spin sends thousands. (A fresh clone's Cluster run counted 61.)
		if n := totalCommands(t, d) - calls; n > 200 {
			t.Errorf("%s: Lock sent %d commands in 300ms on a key without expiry; want a poll, not a spin", key, n)
		}
		if v, _ := admin.Get(ctx, key).Result(); v != "foreign-token" {
			t.Fatalf("%s: dlock changed a foreign holder's value to %q", key, v)
		}
		admin.Del(ctx, key)
		admin.HSet(ctx, key, "f", "v")
		if _, err := m.TryLock(ctx); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Fatalf("%s holding a hash: TryLock: %v; want WRONGTYPE", key, err)
		}
		admin.Del(ctx, key)
		l2, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if l2.Fence() <= fence {
			t.Fatalf("%s: fence %d after %d", key, l2.Fence(), fence)
		}
		if err := l2.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if keys := dlockKeys(t, d); len(keys) > 0 {
			for _, k := range keys {
				if !strings.HasPrefix(k, "dlock:fence:{") {
					t.Errorf("left behind: %q", k)
				}
			}
		}
	}
}

// Keys whose hash tag Redis Cluster reads in its own way: an empty {},
// a second {...}, an unclosed {. On a Cluster, a fence counter in another
// slot than the key would fail the acquire with CROSSSLOT.
func testBareKeyTags(t *testing.T, d *deployment, open opener) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newClient(t, d, open)
	for _, key := range []string{"{}:tags", "a{b}c{d}", "{a}{b}", "tags{", "}{x}", "x{}{y}", "ünï{cødé}"} {
		l, err := c.NewMutex(key, redislock.WithBareKey()).TryLock(ctx)
		if err != nil {
			t.Fatalf("%q: TryLock: %v", key, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("%q: Release: %v", key, err)
		}
	}
}

// totalCommands is the number of commands the servers of d have run.
func totalCommands(t testing.TB, d *deployment) int {
	n := 0
	for _, s := range d.servers {
		out, err := s.Do("INFO", "stats")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
				var k int
				for _, r := range v {
					k = k*10 + int(r-'0')
				}
				n += k
			}
		}
	}
	return n
}

// dlockKeys lists the keys under dlock: on every server of d.
func dlockKeys(t testing.TB, d *deployment) []string {
	var all []string
	for _, s := range d.servers {
		out, err := s.Do("KEYS", "dlock:*")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range strings.Fields(out) {
			all = append(all, k)
		}
	}
	return all
}

// The bare acquire and release scripts, sent twice (a transport that
// resends after a lost reply): the second acquire gets the lock with a
// larger fence, not a refusal that would leave the key blocking everyone
// until it expires; the second release does nothing.
func TestIntegrationBareKeyScriptsSentTwice(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	admin := d.admin(t)
	ctx := context.Background()
	k := rediskeys.Bare("twice")
	run := func(s *redisscript.Script, keys []string, args ...any) any {
		v, err := admin.Eval(ctx, s.Src, keys, args...).Result()
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		return v
	}
	f1 := run(redisscript.BareAcquire, []string{k.Base, k.Fence}, "tok", "5000").(int64)
	f2 := run(redisscript.BareAcquire, []string{k.Base, k.Fence}, "tok", "5000").(int64)
	if f1 <= 0 || f2 <= f1 {
		t.Fatalf("acquire sent twice: fences %d then %d; want both granted, the second larger", f1, f2)
	}
	if v := run(redisscript.BareAcquire, []string{k.Base, k.Fence}, "other", "5000").(int64); v >= 0 || v < -5000 {
		t.Fatalf("another owner's acquire: %d; want minus the remaining TTL", v)
	}
	if r1, r2 := run(redisscript.BareRelease, []string{k.Base}, "tok", k.Channel), run(redisscript.BareRelease, []string{k.Base}, "tok", k.Channel); r1 != int64(1) || r2 != int64(0) {
		t.Fatalf("release sent twice: %v then %v; want 1 then 0", r1, r2)
	}
}

// A Mutex made WithBareKey passes the conformance suite (on one server:
// the Cluster's part is the acquire's slot, which BareKeyLayout checks),
// with an operator's GET, PTTL and DEL for Inspect and ForceUnlock, which
// read dlock's own layout.
func TestIntegrationBareKeyConformance(t *testing.T) {
	t.Parallel()
	for _, top := range []struct {
		name string
		d    func(testing.TB) *deployment
	}{{"standalone", standalone}} {
		t.Run(top.name, func(t *testing.T) {
			if apart(t) {
				return
			}
			d := top.d(t)
			b := kindBackend(d, goRedis, func(c *redislock.Client, key string, opts ...redislock.Option) dlock.Locker {
				return c.NewMutex(key, append(opts, redislock.WithBareKey())...)
			})
			b.Kinds = nil
			// Client.Inspect and ForceUnlock read dlock's own layout: an
			// operator reads a bare key with GET and PTTL, and frees it
			// with DEL, as this does.
			b.Admin = func(t testing.TB) dlock.Admin { return bareAdmin{d.admin(t)} }
			b.Inspect = func(t testing.TB, key string) dlock.Info {
				info, err := bareAdmin{d.admin(t)}.Inspect(context.Background(), key)
				if err != nil {
					t.Fatal(err)
				}
				return info
			}
			b.Sabotage = func(t testing.TB, key string) {
				if err := d.admin(t).Del(context.Background(), key).Err(); err != nil {
					t.Fatalf("DEL: %v", err)
				}
			}
			b.Leftovers = func(t testing.TB, key string) []string {
				ctx := context.Background()
				var left []string
				if n, err := d.admin(t).Exists(ctx, key).Result(); err != nil || n > 0 {
					left = append(left, fmt.Sprintf("lock key (exists=%d, err=%v)", n, err))
				}
				ch := rediskeys.Bare(key).Channel
				for _, s := range d.servers {
					if out, err := s.Do("PUBSUB", "NUMSUB", ch); err != nil || out != ch+"\n0" {
						left = append(left, fmt.Sprintf("subscription on %s: %q %v", s.Addr(), out, err))
					}
				}
				return left
			}
			dlocktest.Run(t, b)
		})
	}
}

// bareAdmin is what an operator does with a bare key: GET and PTTL to see
// its holder, DEL to free it.
type bareAdmin struct{ rdb redis.UniversalClient }

func (a bareAdmin) Inspect(ctx context.Context, name string) (dlock.Info, error) {
	v, err := a.rdb.Get(ctx, name).Result()
	if errors.Is(err, redis.Nil) {
		return dlock.Info{Name: name, Kind: dlock.KindFree}, nil
	}
	if err != nil {
		return dlock.Info{}, err
	}
	pttl, err := a.rdb.PTTL(ctx, name).Result()
	if err != nil {
		return dlock.Info{}, err
	}
	return dlock.Info{Name: name, Kind: dlock.KindMutex, TTL: max(pttl, 0),
		Holders: []dlock.Holder{{Owner: v, Mode: dlock.ModeExclusive, Label: lease.Label(v)}}}, nil
}

func (a bareAdmin) ForceUnlock(ctx context.Context, name string) (bool, error) {
	n, err := a.rdb.Del(ctx, name).Result()
	return n > 0, err
}

func (bareAdmin) Close() error { return nil }

// The migration from the bare key to dlock's own layout (docs/interop-redis.md):
// a MultiLock of both on the same name excludes an instance on either one
// alone, both ways.
func TestIntegrationBareKeyMigrationMultiLock(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newClient(t, d, goRedis)
	const key = "orders:42"
	both := redislock.NewMultiLock(c.NewMutex(key, redislock.WithBareKey()), c.NewMutex(key))
	for _, alone := range []*redislock.Mutex{c.NewMutex(key, redislock.WithBareKey()), c.NewMutex(key)} {
		l, err := both.TryLock(ctx)
		if err != nil {
			t.Fatalf("MultiLock of the bare key and dlock's layout: %v", err)
		}
		if _, err := alone.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
			t.Fatalf("%s alone while the MultiLock holds both: %v; want ErrNotObtained", alone.Name(), err)
		}
		l.Release(ctx)
		la, err := alone.TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := both.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
			t.Fatalf("MultiLock while one layout is held alone: %v; want ErrNotObtained", err)
		}
		la.Release(ctx)
	}
}
