// Command residue measures what dlock leaves on a Redis server: it locks
// and releases many distinct names of each kind of lock, and reports the
// server's key count (DBSIZE) and used_memory before, while the locks are
// held, just after their release, and once the horizon has passed for
// holders that vanished without releasing.
//
//	cd bench && go run ./cmd/residue [-names 100000] [-ttl 2s] [-out FILE]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/servers"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
)

func main() {
	names := flag.Int("names", 100000, "distinct lock names per kind")
	ttl := flag.Duration("ttl", 2*time.Second, "TTL of the locks whose holders vanish")
	workers := flag.Int("workers", 64, "goroutines taking locks")
	out := flag.String("out", "", "also write the report to this file")
	flag.Parse()
	if err := run(*names, *workers, *ttl, *out); err != nil {
		fmt.Fprintln(os.Stderr, "residue:", err)
		servers.StopAll()
		os.Exit(1)
	}
}

type kind struct {
	name string
	lock func(c *redislock.Client, name string, opts ...redislock.Option) dlock.Locker
}

var kinds = []kind{
	{"Mutex", func(c *redislock.Client, n string, o ...redislock.Option) dlock.Locker { return c.NewMutex(n, o...) }},
	{"ReentrantMutex", func(c *redislock.Client, n string, o ...redislock.Option) dlock.Locker {
		return c.NewReentrantMutex(n, o...)
	}},
	{"FairMutex", func(c *redislock.Client, n string, o ...redislock.Option) dlock.Locker {
		return c.NewFairMutex(n, o...)
	}},
	{"RWMutex.write", func(c *redislock.Client, n string, o ...redislock.Option) dlock.Locker {
		return c.NewRWMutex(n, o...).Writer()
	}},
	{"RWMutex.read", func(c *redislock.Client, n string, o ...redislock.Option) dlock.Locker {
		return c.NewRWMutex(n, o...).Reader()
	}},
	{"Semaphore", func(c *redislock.Client, n string, o ...redislock.Option) dlock.Locker {
		return c.NewSemaphore(n, 2, o...)
	}},
}

// usage is what the server holds at one moment.
type usage struct {
	keys     int64 // DBSIZE
	counters int64 // of which fence counters, dlock:fence:{tag}
	memory   int64 // used_memory, bytes
}

func measure(rdb *redis.Client) (usage, error) {
	ctx := context.Background()
	n, err := rdb.DBSize(ctx).Result()
	if err != nil {
		return usage{}, err
	}
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return usage{}, err
	}
	u := usage{keys: n, memory: -1}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			if u.memory, err = strconv.ParseInt(v, 10, 64); err != nil {
				return usage{}, err
			}
		}
	}
	if u.memory < 0 {
		return usage{}, fmt.Errorf("INFO memory has no used_memory")
	}
	iter := rdb.Scan(ctx, 0, "dlock:fence:{*", 10000).Iterator()
	for iter.Next(ctx) {
		u.counters++
	}
	return u, iter.Err()
}

func (u usage) String() string {
	return fmt.Sprintf("%d keys (+%d counters), %.1f MiB", u.keys-u.counters, u.counters, float64(u.memory)/(1<<20))
}

// each runs f for names 0..n-1 on w goroutines and returns the first error.
func each(n, w int, f func(i int) error) error {
	var (
		wg    sync.WaitGroup
		next  = make(chan int)
		once  sync.Once
		first error
	)
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

func run(names, workers int, ttl time.Duration, out string) error {
	srv, err := servers.LaunchRedis(servers.RedisConfig{})
	if err != nil {
		return err
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, PoolSize: workers + 4})
	defer rdb.Close()
	locks := redislock.New(goredisconn.New(rdb))
	defer locks.Close()
	ctx := context.Background()

	var report strings.Builder
	fmt.Fprintf(&report, "# What dlock leaves on Redis: %d names per kind\n\n", names)
	fmt.Fprintf(&report, "redis-server on 127.0.0.1, no persistence; %d goroutines; one client. "+
		"\"held\": every name locked (TTL 1m, no renewal); \"released\": right after every Release; "+
		"\"vanished\": %d more names locked with TTL %v and never released, measured after TTL + 1s.\n\n", workers, names, ttl)
	fmt.Fprintln(&report, "| kind | before | held | released | vanished, after the horizon | other keys left |")
	fmt.Fprintln(&report, "|---|---|---|---|---|---|")
	for _, k := range kinds {
		before, err := measure(rdb)
		if err != nil {
			return err
		}
		leases := make([]dlock.Lease, names)
		start := time.Now()
		err = each(names, workers, func(i int) error {
			l, err := k.lock(locks, fmt.Sprintf("residue-%s-%d", k.name, i), redislock.WithTTL(time.Minute), redislock.WithoutRenewal()).TryLock(ctx)
			leases[i] = l
			return err
		})
		if err != nil {
			return fmt.Errorf("%s: %w", k.name, err)
		}
		held, err := measure(rdb)
		if err != nil {
			return err
		}
		if err := each(names, workers, func(i int) error { return leases[i].Release(ctx) }); err != nil {
			return fmt.Errorf("%s: Release: %w", k.name, err)
		}
		took := time.Since(start)
		released, err := measure(rdb)
		if err != nil {
			return err
		}
		err = each(names, workers, func(i int) error {
			_, err := k.lock(locks, fmt.Sprintf("residue-%s-vanished-%d", k.name, i), redislock.WithTTL(ttl), redislock.WithoutRenewal()).TryLock(ctx)
			return err
		})
		if err != nil {
			return fmt.Errorf("%s: %w", k.name, err)
		}
		time.Sleep(ttl + time.Second)
		after, err := measure(rdb)
		if err != nil {
			return err
		}
		fmt.Fprintf(&report, "| %s | %v | %v | %v | %v | %d |\n", k.name, before, held, released, after,
			(after.keys-after.counters)-(before.keys-before.counters))
		fmt.Fprintf(os.Stderr, "%s: %d names locked and released in %v\n", k.name, names, took.Round(time.Millisecond))
	}
	if k := waitEmpty(rdb, time.Minute+5*time.Second); k.keys >= 0 {
		fmt.Fprintf(&report, "\nOne minute (the held locks' TTL) after the last release: %v.\n", k)
	}
	fmt.Fprintln(&report, "\nThe keys a kind leaves after its release, until one TTL has passed, are Semaphore limits (they live one TTL after the last permit). "+
		"The counters are the fence counters: one per Cluster slot at most (16384), shared by every name.")
	fmt.Print(report.String())
	if out != "" {
		return os.WriteFile(out, []byte(report.String()), 0o644)
	}
	return nil
}

// waitEmpty waits until only fence counters are left, or for at most d,
// and returns the last measurement (keys < 0 if it failed).
func waitEmpty(rdb *redis.Client, d time.Duration) usage {
	deadline := time.Now().Add(d)
	for {
		u, err := measure(rdb)
		if err != nil {
			return usage{keys: -1}
		}
		if u.keys == u.counters || time.Now().After(deadline) {
			return u
		}
		time.Sleep(time.Second)
	}
}
