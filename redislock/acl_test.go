package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// leastACL is the Redis ACL rule the README's Security section gives for
// a user that only runs dlock's locks: its keys and channels, and the
// commands its scripts (commands inside a script are checked too), pub/sub
// and the transports' handshake need.
var leastACL = []string{"on", ">pw", "resetkeys", "~dlock:*", "resetchannels", "&dlock:*", "-@all",
	"+@read", "+@write", "+eval", "+evalsha", "+script|load", "+time",
	"+publish", "+subscribe", "+unsubscribe", "+ping", "+hello", "+client|setname"}

// A user with only leastACL can take, wait for, renew and release every
// kind of lock, and Inspect and ForceUnlock them; it can touch no key
// outside dlock:*.
func TestIntegrationLeastPrivilegeUser(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	srv := d.servers[0]
	if _, err := srv.Do(append([]string{"ACL", "SETUSER", "dlock"}, leastACL...)...); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	open := func() *redislock.Client {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "dlock", Password: "pw", ContextTimeoutEnabled: true})
		c := redislock.New(goredisconn.New(rdb))
		t.Cleanup(func() { c.Close(); rdb.Close() })
		return c
	}
	a, b := open(), open()
	ctx := timeout(t, 30*time.Second)
	lockers := map[string]func(c *redislock.Client) dlock.Locker{
		"Mutex":     func(c *redislock.Client) dlock.Locker { return c.NewMutex("acl", redislock.WithTTL(time.Second)) },
		"FairMutex": func(c *redislock.Client) dlock.Locker { return c.NewFairMutex("acl", redislock.WithTTL(time.Second)) },
		"ReentrantMutex": func(c *redislock.Client) dlock.Locker {
			return c.NewReentrantMutex("acl", redislock.WithTTL(time.Second))
		},
		"RWMutex.write": func(c *redislock.Client) dlock.Locker {
			return c.NewRWMutex("acl", redislock.WithTTL(time.Second)).Writer()
		},
		"Semaphore": func(c *redislock.Client) dlock.Locker {
			return c.NewSemaphore("acl", 1, redislock.WithTTL(time.Second))
		},
	}
	for kind, newLocker := range lockers {
		held, err := newLocker(a).Lock(ctx)
		if err != nil {
			t.Fatalf("%s: Lock as the least-privilege user: %v", kind, err)
		}
		waited := make(chan error, 1)
		go func() {
			l, err := newLocker(b).Lock(ctx)
			if err == nil {
				err = l.Release(ctx)
			}
			waited <- err
		}()
		time.Sleep(700 * time.Millisecond) // past a renewal, which must work too
		if info, err := a.Inspect(ctx, "acl"); err != nil || !info.Held() {
			t.Errorf("%s: Inspect as the least-privilege user = %+v, %v", kind, info, err)
		}
		if err := held.Release(ctx); err != nil {
			t.Errorf("%s: Release: %v", kind, err)
		}
		if err := <-waited; err != nil {
			t.Errorf("%s: the waiter: %v", kind, err)
		}
	}
	if _, err := a.ForceUnlock(ctx, "acl"); err != nil {
		t.Errorf("ForceUnlock as the least-privilege user: %v", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "dlock", Password: "pw"})
	defer rdb.Close()
	if err := rdb.Set(context.Background(), "orders:1", "x", 0).Err(); err == nil {
		t.Error("the least-privilege user wrote a key outside dlock:*")
	}
}
