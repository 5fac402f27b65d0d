package redislock_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/dlock-go/dlock/redislock/rueidisconn"
	"github.com/redis/go-redis/v9"
)

// Bad arguments need no server: each is reported by the first call.
func TestBadArguments(t *testing.T) {
	ctx := context.Background()
	c := redislock.New(goredisconn.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})))
	tests := []struct {
		name string
		l    dlock.Locker
		want string
	}{
		{"empty name", c.NewMutex(""), "empty lock name"},
		{"brace in name", c.NewMutex("a}b"), "contains a brace"},
		{"zero TTL", c.NewMutex("x", redislock.WithTTL(0)), "TTL 0s is outside the range 10ms to 24h0m0s"},
		{"negative TTL", c.NewMutex("x", redislock.WithTTL(-time.Second)), "TTL -1s is outside the range"},
		{"tiny TTL", c.NewMutex("x", redislock.WithTTL(5*time.Millisecond)), "TTL 5ms is outside the range 10ms to 24h0m0s; set it with WithTTL"},
		{"huge TTL", c.NewMutex("x", redislock.WithTTL(math.MaxInt64)), "outside the range 10ms to 24h0m0s"},
		{"nil retry", c.NewMutex("x", redislock.WithRetry(nil)), "retry strategy is nil"},
		{"bad retry", c.NewMutex("x", redislock.WithRetry(dlock.LinearBackoff(0, 0))), "LinearBackoff"},
		{"nil Conn", redislock.New(nil).NewMutex("x"), "nil Conn"},
		{"nil go-redis client", redislock.New(goredisconn.New(nil)).NewMutex("x"), "nil client"},
		{"nil rueidis client", redislock.New(rueidisconn.New(nil)).NewMutex("x"), "nil client"},
		{"typed-nil go-redis client", redislock.New(goredisconn.New((*redis.Client)(nil))).NewMutex("x"), "nil client"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, op := range []func(context.Context) (dlock.Lease, error){tt.l.TryLock, tt.l.Lock} {
				lease, err := op(ctx)
				if err == nil || lease != nil {
					t.Fatalf("got a lease (%v); want an error mentioning %q", err, tt.want)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %q does not mention %q", err, tt.want)
				}
			}
		})
	}
}

func TestIntegrationServerSideProblemsAreNamed(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	srv := d.servers[0]
	ctx := context.Background()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c := newClient(t, d, tr.open)
			check := func(name, want string) {
				t.Helper()
				for _, op := range []func(context.Context) (dlock.Lease, error){c.NewMutex(name).TryLock, c.NewMutex(name).Lock} {
					_, err := op(ctx)
					if err == nil || !strings.Contains(err.Error(), want) || errors.Is(err, dlock.ErrNotObtained) {
						t.Fatalf("%s: error %v; want one mentioning %q, not ErrNotObtained", name, err, want)
					}
				}
			}
			srv.Do("HSET", lockKey(tr.name+"-hash"), "f", "v")
			check(tr.name+"-hash", "WRONGTYPE")
			srv.Do("LPUSH", redislock.FenceKey(tr.name+"-fence"), "x")
			defer srv.Do("DEL", redislock.FenceKey(tr.name+"-fence"))
			check(tr.name+"-fence", "WRONGTYPE")
			srv.Do("SET", redislock.FenceKey(tr.name+"-nan"), "abc")
			defer srv.Do("DEL", redislock.FenceKey(tr.name+"-nan"))
			check(tr.name+"-nan", "does not hold a number")
			if out, _ := srv.Do("GET", redislock.FenceKey(tr.name+"-nan")); out != "abc" {
				t.Errorf("the counter that did not hold a number holds %q after a failed acquire; want it left as it was", out)
			}
			srv.Do("SET", lockKey(tr.name+"-forever"), "someone")
			check(tr.name+"-forever", "without an expiry")
			for _, name := range []string{"-fence", "-nan"} {
				if out, _ := srv.Do("EXISTS", lockKey(tr.name+name)); out != "0" {
					t.Errorf("a failed acquire on %s left the lock key behind", name)
				}
			}
		})
	}
}

func TestIntegrationServerRefusingScripts(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	srv := d.servers[0]
	if _, err := srv.Do("ACL", "SETUSER", "noscript", "on", ">pw", "~*", "&*", "+@all", "-@scripting"); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	c := redislock.New(goredisconn.New(redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "noscript", Password: "pw"})))
	t.Cleanup(func() { c.Close() })
	_, err := c.NewMutex("x").TryLock(context.Background())
	if err == nil || !strings.Contains(err.Error(), "refused to run a Lua script") {
		t.Fatalf("TryLock as a user without scripting = %v; want an error saying scripts are refused", err)
	}
}
