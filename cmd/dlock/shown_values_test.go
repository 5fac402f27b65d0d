package main_test

import (
	"context"
	"strings"
	"testing"

	dl "github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// dlock elect --leader prints the leader's value as dlock inspect prints
// a stored value (issue 33): escaped, so that a value with escape
// sequences cannot drive the terminal or a newline forge a second line,
// and cut short.
func TestIntegrationElectLeaderValueShown(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c := redislock.New(goredisconn.New(rdb))
	defer c.Close()
	name := lockName(t)
	value := "\x1b[2J\x1b[1;1Hhost-a\n42 forged-leader" + strings.Repeat("x", 100<<10)
	lease, err := c.NewElection(name).Campaign(context.Background(), value)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	r := dlock(t, nil, "elect", "--leader", "--redis", "redis://"+srv.Addr(), name)
	t.Logf("measured: %d bytes on stdout", len(r.stdout))
	if r.code != 0 || strings.ContainsAny(r.stdout, "\x1b") || strings.Count(r.stdout, "\n") != 1 || !strings.Contains(r.stdout, `\x1b[2J`) || len(r.stdout) > 1024 {
		t.Errorf("elect --leader of a hostile value: exit %d, %d bytes, %q; want one line, escaped, at most 1024 bytes", r.code, len(r.stdout), r.stdout[:min(len(r.stdout), 300)])
	}
}

// dlock inspect's table shows a bounded number of holders: a semaphore
// with 150 permits held lists 100 and says how many more there are (-o
// json lists them all, as the library returns them: at most 1000).
func TestIntegrationInspectManyHolders(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c := redislock.New(goredisconn.New(rdb))
	defer c.Close()
	name := lockName(t)
	sem := c.NewSemaphore(name, 150)
	ctx := dl.WithLabel(context.Background(), strings.Repeat("l", 200))
	for range 150 {
		lease, err := sem.TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release(context.Background())
	}
	r := dlock(t, nil, "inspect", "--redis", "redis://"+srv.Addr(), name)
	rows := strings.Count(r.stdout, "\nholder ") - strings.Count(r.stdout, "more (-o json")
	t.Logf("measured: %d holder rows, %d bytes", rows, len(r.stdout))
	if r.code != 0 || rows != 100 || !strings.Contains(r.stdout, "50 more") {
		t.Errorf("inspect of a semaphore with 150 holders: exit %d, %d holder rows, %d bytes; want 100 and a line naming 50 more", r.code, rows, len(r.stdout))
	}
	r = dlock(t, nil, "inspect", "-o", "json", "--redis", "redis://"+srv.Addr(), name)
	if n := strings.Count(r.stdout, `"owner"`); r.code != 0 || n != 150 {
		t.Errorf("inspect -o json: exit %d, %d holders; want 150", r.code, n)
	}
}
