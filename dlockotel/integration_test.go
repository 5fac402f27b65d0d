package dlockotel_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlockotel"
	"github.com/dlock-go/dlock/dlockprom"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/mysqllock"
	"github.com/dlock-go/dlock/pglock"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/dlock-go/dlock/redlock"
	"github.com/dlock-go/dlock/zklock"
	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopAll()
	os.Exit(code)
}

// ttl is the lease time of the integration tests' locks: a lease taken
// from its holder is noticed within it.
const ttl = time.Second

// A backend makes clients of one server, started by start, whose locks
// report to obs; name is a lock name it accepts.
type backend struct {
	name, lock string
	start      func(t *testing.T) func(obs dlock.Observer) (func(name string) dlock.Locker, dlock.Admin)
}

var backends = []backend{
	{"redislock", "otel-orders", func(t *testing.T) func(dlock.Observer) (func(string) dlock.Locker, dlock.Admin) {
		srv := testenv.StartRedis(t, testenv.RedisConfig{})
		return func(obs dlock.Observer) (func(string) dlock.Locker, dlock.Admin) {
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			c := redislock.New(goredisconn.New(rdb), redislock.WithObserver(obs))
			t.Cleanup(func() { c.Close(); rdb.Close() })
			return func(n string) dlock.Locker { return c.NewMutex(n, redislock.WithTTL(ttl)) }, c
		}
	}},
	{"redlock", "otel-orders", func(t *testing.T) func(dlock.Observer) (func(string) dlock.Locker, dlock.Admin) {
		srvs := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
		return func(obs dlock.Observer) (func(string) dlock.Locker, dlock.Admin) {
			var nodes []redisconn.Conn
			for _, s := range srvs {
				rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
				t.Cleanup(func() { rdb.Close() })
				nodes = append(nodes, goredisconn.New(rdb))
			}
			// Fresh nodes vote once they have been up for the restart
			// window: a short one, for a short wait.
			c := redlock.New(nodes, redlock.WithObserver(obs), redlock.WithRestartWindow(ttl+500*time.Millisecond), redlock.WithNodeTimeout(200*time.Millisecond))
			t.Cleanup(func() { c.Close() })
			return func(n string) dlock.Locker { return c.NewMutex(n, redlock.WithTTL(ttl)) }, c
		}
	}},
	{"zklock", "/otel-orders", func(t *testing.T) func(dlock.Observer) (func(string) dlock.Locker, dlock.Admin) {
		zk := testenv.StartZooKeeper(t)
		return func(obs dlock.Observer) (func(string) dlock.Locker, dlock.Admin) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, err := zklock.New(ctx, []string{zk.Addr()}, zklock.WithSessionTimeout(3*time.Second), zklock.WithObserver(obs))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return func(n string) dlock.Locker { return c.NewMutex(n, zklock.WithTTL(ttl)) }, c
		}
	}},
	{"etcdlock", "otel-orders", func(t *testing.T) func(dlock.Observer) (func(string) dlock.Locker, dlock.Admin) {
		e := testenv.StartEtcd(t)
		return func(obs dlock.Observer) (func(string) dlock.Locker, dlock.Admin) {
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			c := etcdlock.New(cli, etcdlock.WithObserver(obs))
			t.Cleanup(func() { c.Close(); cli.Close() })
			return func(n string) dlock.Locker { return c.NewMutex(n, etcdlock.WithTTL(ttl)) }, c
		}
	}},
	{"pglock", "otel-orders", func(t *testing.T) func(dlock.Observer) (func(string) dlock.Locker, dlock.Admin) {
		pg := testenv.StartPostgres(t)
		migrated := false
		return func(obs dlock.Observer) (func(string) dlock.Locker, dlock.Admin) {
			pool, err := pgxpool.New(context.Background(), pg.URL())
			if err != nil {
				t.Fatal(err)
			}
			c := pglock.New(pool, pglock.WithObserver(obs))
			t.Cleanup(func() { c.Close(); pool.Close() })
			if !migrated {
				if err := c.Migrate(t.Context()); err != nil {
					t.Fatal(err)
				}
				migrated = true
			}
			return func(n string) dlock.Locker { return c.NewMutex(n, pglock.WithTTL(ttl)) }, c
		}
	}},
	{"mysqllock", "otel-orders", func(t *testing.T) func(dlock.Observer) (func(string) dlock.Locker, dlock.Admin) {
		m := testenv.StartMariaDB(t)
		migrated := false
		return func(obs dlock.Observer) (func(string) dlock.Locker, dlock.Admin) {
			db, err := sql.Open("mysql", m.DSN())
			if err != nil {
				t.Fatal(err)
			}
			c := mysqllock.New(db, mysqllock.WithObserver(obs))
			t.Cleanup(func() { c.Close(); db.Close() })
			if !migrated {
				if err := c.Migrate(t.Context()); err != nil {
					t.Fatal(err)
				}
				migrated = true
			}
			return func(n string) dlock.Locker { return c.NewMutex(n, mysqllock.WithTTL(ttl)) }, c
		}
	}},
}

// On every backend, against its real server: a TryLock that fails, a
// Lock that waits for the holder's release, and a lease that another
// client takes away with ForceUnlock, all under the caller's span; the
// metrics count what dlockprom's Collector counts of the same run.
func TestIntegrationEveryBackend(t *testing.T) {
	testenv.SkipIfShort(t, "needs the backends' servers")
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := newSDK(t)
			prom := dlockprom.New()
			client := b.start(t)
			obs := dlock.Observers(s.Observer, prom)
			holder, admin := client(obs)
			waiter, _ := client(obs)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			ctx, root := s.rootContext(ctx)

			first, err := holder(b.lock).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := waiter(b.lock).TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
				t.Fatalf("TryLock of a held lock: %v", err)
			}
			got := make(chan dlock.Lease, 1)
			go func() {
				l, err := waiter(b.lock).Lock(ctx)
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
			for deadline := time.Now().Add(20 * time.Second); s.value(t, "dlock.lock.waiting", nil) != 1; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("dlock.lock.waiting never reached 1")
				}
			}
			waiting := time.Now() // the waiter's call began before this
			time.Sleep(300 * time.Millisecond)
			hold := time.Since(waiting)
			if err := first.Release(ctx); err != nil {
				t.Fatal(err)
			}
			second := <-got
			if second == nil {
				t.FailNow()
			}
			if ok, err := admin.ForceUnlock(ctx, b.lock); !ok || err != nil {
				t.Fatalf("ForceUnlock: %v, %v", ok, err)
			}
			select {
			case <-second.Done():
			case <-time.After(30 * time.Second):
				t.Fatal("the loss was not noticed")
			}
			for deadline := time.Now().Add(10 * time.Second); len(s.named("dlock.lease")) < 2; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) { // the event follows Done
					t.Fatalf("%d dlock.lease spans ended; want 2", len(s.named("dlock.lease")))
				}
			}
			root.End()
			t.Logf("%s: the span tree:\n%s", b.name, tree(s.spans.GetSpans()))

			// The calls.
			locks := s.named("dlock.lock")
			var outcomes []string
			for _, l := range locks {
				v, _ := attr(l.Attributes, dlockotel.AttrOutcome)
				outcomes = append(outcomes, v.AsString())
			}
			if strings.Join(outcomes, ",") != "granted,not_obtained,granted" {
				t.Fatalf("dlock.lock outcomes %v; want granted,not_obtained,granted", outcomes)
			}
			if w, _ := attr(locks[2].Attributes, dlockotel.AttrWaited); !w.AsBool() {
				t.Errorf("the contended Lock's span has dlock.waited %v", w.Emit())
			}
			if d := locks[2].EndTime.Sub(locks[2].StartTime); d < hold {
				t.Errorf("the contended Lock's span lasted %v; want at least the holder's hold after the wait began, %v", d, hold)
			}
			// The leases.
			leases := s.named("dlock.lease")
			for i, want := range []struct {
				fence  uint64
				events string
			}{{first.Fence(), "granted,released"}, {second.Fence(), "granted,lost"}} {
				l := leases[i]
				if got := strings.Join(eventNames(l), ","); strings.ReplaceAll(strings.ReplaceAll(got, "renewed,", ""), "renew_failed,", "") != want.events {
					t.Errorf("lease %d events %s; want %s (renewals and failed ones aside)", i, got, want.events)
				}
				for _, e := range l.Events {
					if f, _ := attr(e.Attributes, dlockotel.AttrFence); uint64(f.AsInt64()) != want.fence {
						t.Errorf("lease %d event %s: fence %v; want %d", i, e.Name, f.Emit(), want.fence)
					}
				}
			}
			lost := leases[1].Events[len(leases[1].Events)-1]
			cause, _ := attr(lost.Attributes, dlockotel.AttrCause)
			t.Logf("%s: lost by ForceUnlock with cause %s", b.name, cause.Emit())
			for _, sp := range append(locks, leases...) {
				if sp.Parent.SpanID() != root.SpanContext().SpanID() {
					t.Errorf("%s span's parent %v; want the caller's span", sp.Name, sp.Parent.SpanID())
				}
				if v, _ := attr(sp.Attributes, dlockotel.AttrBackend); v.AsString() != b.name {
					t.Errorf("%s span's backend %q; want %q", sp.Name, v.Emit(), b.name)
				}
			}

			// The metrics, beside dlockprom's.
			lbl := map[string]string{"dlock.lock.name": b.lock, "dlock.backend": b.name}
			with := func(k, v string) map[string]string {
				m := map[string]string{k: v}
				for k, v := range lbl {
					m[k] = v
				}
				return m
			}
			for _, c := range []struct {
				otel string
				olbl map[string]string
				prom string
				plbl map[string]string
				want float64 // -2: whatever dlockprom says
			}{
				{"dlock.lock.acquisitions", with("dlock.result", "acquired"), "dlock_acquisitions_total", map[string]string{"result": "acquired"}, 2},
				{"dlock.lock.acquisitions", with("dlock.result", "not_obtained"), "dlock_acquisitions_total", map[string]string{"result": "not_obtained"}, 1},
				{"dlock.lock.acquisitions", with("dlock.result", "error"), "dlock_acquisitions_total", map[string]string{"result": "error"}, -1},
				{"dlock.lock.wait.duration", lbl, "dlock_wait_seconds", nil, 2},
				{"dlock.leases.held", lbl, "dlock_holders", nil, 0},
				{"dlock.lock.waiting", lbl, "dlock_waiting", nil, 0},
				{"dlock.lease.renewals", with("dlock.result", "ok"), "dlock_renewals_total", map[string]string{"result": "ok"}, -2},
				{"dlock.lease.renewals", with("dlock.result", "failed"), "dlock_renewals_total", map[string]string{"result": "failed"}, -2},
				{"dlock.lease.lost", with("dlock.cause", cause.AsString()), "dlock_losses_total", map[string]string{"cause": cause.AsString()}, 1},
				{"dlock.lease.lost", lbl, "dlock_losses_total", nil, 1},
				{"dlock.lease.hold.duration", lbl, "dlock_hold_seconds", nil, 2},
			} {
				o, p := s.value(t, c.otel, c.olbl), promValue(t, prom, c.prom, c.plbl)
				if o != p || (c.want != -2 && o != c.want) {
					t.Errorf("%s%v = %v, dlockprom's %s%v = %v; want both %v", c.otel, c.olbl, o, c.prom, c.plbl, p, c.want)
				}
			}

			// More lock names than the bound, each taken and released:
			// the Observer records DefaultMaxLockNames of them, the rest
			// as OtherName. (TestCardinalityBound feeds a thousand; here a
			// thousand took 3.6s to 14s a backend.)
			const more = dlockotel.DefaultMaxLockNames + 50
			names := make(chan string)
			go func() {
				for i := range more {
					names <- fmt.Sprintf("%s-%d", b.lock, i)
				}
				close(names)
			}()
			start := time.Now()
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for n := range names {
						l, err := holder(n).TryLock(ctx)
						if err != nil { // load; the bound holds whatever the outcome
							t.Logf("TryLock(%s): %v", n, err)
							continue
						}
						l.Release(ctx)
					}
				})
			}
			wg.Wait()
			t.Logf("%s: %d names taken and released in %v", b.name, more, time.Since(start).Round(time.Millisecond))
			seen := s.names(t, "dlock.lock.acquisitions")
			if len(seen) != dlockotel.DefaultMaxLockNames+1 || !seen[dlockotel.OtherName] {
				t.Errorf("%d lock names in dlock.lock.acquisitions after %d; want %d and %s", len(seen), more+1, dlockotel.DefaultMaxLockNames, dlockotel.OtherName)
			}
			if got := s.value(t, "dlock.leases.held", nil); got != 0 {
				t.Errorf("%v leases held after every release; want 0", got)
			}
		})
	}
}

// promValue returns the sum of the counter or gauge name's series with
// labels, or the sample count of the histogram; -1 if there are none.
func promValue(t *testing.T, c prometheus.Collector, name string, labels map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got, found := 0.0, false
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metrics
				}
			}
			found = true
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				got += m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				got += m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				got += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	if !found {
		return -1
	}
	return got
}

// tree prints spans as a tree, each with its offset from the first
// start, duration, attributes and events.
func tree(spans tracetest.SpanStubs) string {
	if len(spans) == 0 {
		return ""
	}
	t0 := spans[0].StartTime
	for _, s := range spans {
		if s.StartTime.Before(t0) {
			t0 = s.StartTime
		}
	}
	children := map[string][]tracetest.SpanStub{}
	var roots []tracetest.SpanStub
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanContext.SpanID().String()] = true
	}
	for _, s := range spans {
		if p := s.Parent.SpanID().String(); s.Parent.IsValid() && ids[p] {
			children[p] = append(children[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }
	var b strings.Builder
	var walk func(s tracetest.SpanStub, depth int)
	walk = func(s tracetest.SpanStub, depth int) {
		ind := strings.Repeat("    ", depth)
		var attrs []string
		for _, a := range s.Attributes {
			attrs = append(attrs, fmt.Sprintf("%s=%s", a.Key, a.Value.Emit()))
		}
		status := ""
		if s.Status.Description != "" {
			status = fmt.Sprintf(" status=%s(%q)", s.Status.Code, s.Status.Description)
		}
		fmt.Fprintf(&b, "%s%s  +%s  %s  {%s}%s\n", ind, s.Name, ms(s.StartTime.Sub(t0)), ms(s.EndTime.Sub(s.StartTime)), strings.Join(attrs, " "), status)
		for _, e := range s.Events {
			var ea []string
			for _, a := range e.Attributes {
				ea = append(ea, fmt.Sprintf("%s=%s", a.Key, a.Value.Emit()))
			}
			fmt.Fprintf(&b, "%s    @+%s %s {%s}\n", ind, ms(e.Time.Sub(t0)), e.Name, strings.Join(ea, " "))
		}
		kids := children[s.SpanContext.SpanID().String()]
		slices.SortFunc(kids, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}
