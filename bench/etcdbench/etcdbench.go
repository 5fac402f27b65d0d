// Package etcdbench compares dlock's etcdlock.Mutex with etcd's own
// concurrency.Mutex in one run, on a 3-member etcd cluster it starts
// through internal/servers: E1, one client locking and releasing one name
// uncontended (cycles/s, cycle p50/p99, requests per cycle), and E2, n
// independent clients handing one lock over (hand-over p50/p99 from the
// Release call, acquisitions/s, requests and watch notifications per
// hand-over). Requests and notifications are counted by the servers
// (gRPC messages received, mvcc events sent to watchers), summed over
// the members.
package etcdbench

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/servers"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// Config says how long and how hard to run.
type Config struct {
	Duration time.Duration // per scenario, contender and repetition
	Reps     int           // repetitions; medians are reported
	Clients  int           // E2's independent clients
	Hold     time.Duration // E2's busy work while holding
}

// DefaultConfig is the full run; ShortConfig a smoke run.
func DefaultConfig() Config {
	return Config{Duration: 3 * time.Second, Reps: 3, Clients: 8, Hold: 50 * time.Microsecond}
}

// ShortConfig is a quick smoke run.
func ShortConfig() Config {
	return Config{Duration: 500 * time.Millisecond, Reps: 1, Clients: 8, Hold: 50 * time.Microsecond}
}

// The contenders.
const (
	Dlock       = "dlock-etcd"       // etcdlock.Mutex
	Concurrency = "etcd-concurrency" // concurrency.Mutex on a concurrency.Session
)

// Contenders lists them in report order.
var Contenders = []string{Dlock, Concurrency}

// TTL is both contenders' lease time: etcdlock.WithTTL and the Session's
// TTL.
const TTL = 10 * time.Second

// A Row is the median of one contender's repetitions of one scenario.
type Row struct {
	Scenario, Contender string
	PerSecond           float64       // E1: cycles/s; E2: acquisitions/s
	P50, P99            time.Duration // E1: a cycle; E2: a hand-over
	Requests            float64       // gRPC messages received by the servers per cycle or hand-over
	Notifications       float64       // watch events sent per cycle or hand-over
	Ops                 int           // cycles or hand-overs measured, summed over repetitions
}

// A locker is one client of a contender.
type locker interface {
	lock(ctx context.Context, name string) (func(context.Context) error, error)
	close()
}

type dlockClient struct {
	cli *clientv3.Client
	c   *etcdlock.Client
}

func (d *dlockClient) lock(ctx context.Context, name string) (func(context.Context) error, error) {
	l, err := d.c.NewMutex(name, etcdlock.WithTTL(TTL)).Lock(ctx)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (d *dlockClient) close() { d.c.Close(); d.cli.Close() }

type concurrencyClient struct {
	cli *clientv3.Client
	s   *concurrency.Session
}

func (c *concurrencyClient) lock(ctx context.Context, name string) (func(context.Context) error, error) {
	m := concurrency.NewMutex(c.s, name)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return m.Unlock, nil
}

func (c *concurrencyClient) close() { c.s.Close(); c.cli.Close() }

// open returns a client of contender connected to endpoint.
func open(contender, endpoint string) (locker, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	if contender == Dlock {
		return &dlockClient{cli: cli, c: etcdlock.New(cli)}, nil
	}
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(TTL.Seconds())))
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &concurrencyClient{cli: cli, s: s}, nil
}

// counters are the servers' counts, summed over the members.
type counters struct{ requests, events float64 }

func take(c *servers.EtcdCluster) (counters, error) {
	var n counters
	for _, m := range c.Members {
		r, err := m.Metric("grpc_server_msg_received_total")
		if err != nil {
			return n, err
		}
		e, err := m.Metric("etcd_debugging_mvcc_events_total")
		if err != nil {
			return n, err
		}
		n.requests += r
		n.events += e
	}
	return n, nil
}

// A run is one repetition's measurement.
type run struct {
	perSecond     float64
	lat           []time.Duration
	requests      float64
	notifications float64
}

// Run starts the cluster, runs E1 and E2 for both contenders, rotating
// their order between repetitions, and stops the cluster.
func Run(cfg Config, progress func(format string, args ...any)) ([]Row, error) {
	c, err := servers.LaunchEtcdCluster(3)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	progress("etcd cluster of 3 on %v", c.Addrs())
	runs := map[string]map[string][]run{"E1": {}, "E2": {}}
	for rep := range cfg.Reps {
		order := slices.Clone(Contenders)
		if rep%2 == 1 {
			slices.Reverse(order)
		}
		for _, sc := range []string{"E1", "E2"} {
			for _, contender := range order {
				name := fmt.Sprintf("etcdbench/%s/%s/rep%d", sc, contender, rep)
				var r run
				if sc == "E1" {
					r, err = e1(c, cfg, contender, name)
				} else {
					r, err = e2(c, cfg, contender, name)
				}
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", sc, contender, err)
				}
				progress("%s %-16s rep %d: %.0f/s, p50 %v, %.2f requests, %.2f notifications", sc, contender, rep,
					r.perSecond, percentile(r.lat, 50), r.requests, r.notifications)
				runs[sc][contender] = append(runs[sc][contender], r)
			}
		}
	}
	var rows []Row
	for _, sc := range []string{"E1", "E2"} {
		for _, contender := range Contenders {
			rows = append(rows, median(sc, contender, runs[sc][contender]))
		}
	}
	return rows, nil
}

// e1 is one client, one goroutine, lock and release of one name.
func e1(c *servers.EtcdCluster, cfg Config, contender, name string) (run, error) {
	l, err := open(contender, c.Members[1].Addr())
	if err != nil {
		return run{}, err
	}
	defer l.close()
	ctx := context.Background()
	cycle := func() error {
		release, err := l.lock(ctx, name)
		if err != nil {
			return err
		}
		return release(ctx)
	}
	for range 20 { // warm up
		if err := cycle(); err != nil {
			return run{}, err
		}
	}
	before, err := take(c)
	if err != nil {
		return run{}, err
	}
	var r run
	start := time.Now()
	for time.Since(start) < cfg.Duration {
		t := time.Now()
		if err := cycle(); err != nil {
			return run{}, err
		}
		r.lat = append(r.lat, time.Since(t))
	}
	elapsed := time.Since(start)
	after, err := take(c)
	if err != nil {
		return run{}, err
	}
	n := float64(len(r.lat))
	r.perSecond = n / elapsed.Seconds()
	r.requests = (after.requests - before.requests) / n
	r.notifications = (after.events - before.events) / n
	return r, nil
}

// e2 is cfg.Clients independent clients, spread over the members, taking
// one lock with their blocking Lock, holding it for cfg.Hold of busy work,
// releasing it and asking again at once. A hand-over's latency runs from
// the holder's Release call to the next holder's Lock returning. The
// counters are read at the end of the measured time, before the waiters
// are cancelled, and divided by the hand-overs from the start of the
// first reading to the end of the second.
func e2(c *servers.EtcdCluster, cfg Config, contender, name string) (run, error) {
	clients := make([]locker, cfg.Clients)
	for i := range clients {
		l, err := open(contender, c.Members[i%len(c.Members)].Addr())
		if err != nil {
			for _, o := range clients[:i] {
				o.close()
			}
			return run{}, err
		}
		clients[i] = l
	}
	defer func() {
		for _, l := range clients {
			l.close()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu          sync.Mutex
		lastRelease time.Time
		lat         []time.Duration
		measuring   atomic.Bool
		stop        atomic.Bool
		// counting spans the two counter snapshots, which the clients do
		// not wait for: taken (acquisitions while counting) is what the
		// server counters' difference is divided by.
		counting atomic.Bool
		taken    atomic.Int64
		wg       sync.WaitGroup
		firstErr error
	)
	for _, l := range clients {
		wg.Go(func() {
			for !stop.Load() {
				release, err := l.lock(ctx, name)
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
					return
				}
				now := time.Now()
				if counting.Load() {
					taken.Add(1)
				}
				mu.Lock()
				if measuring.Load() && !lastRelease.IsZero() && !stop.Load() {
					lat = append(lat, now.Sub(lastRelease))
				}
				mu.Unlock()
				spin(cfg.Hold)
				mu.Lock()
				lastRelease = time.Now()
				mu.Unlock()
				if err := release(context.Background()); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
			}
		})
	}
	time.Sleep(cfg.Duration / 5) // every client queued
	counting.Store(true)
	before, err := take(c)
	if err != nil {
		stop.Store(true)
		cancel()
		wg.Wait()
		return run{}, err
	}
	mu.Lock()
	lat = lat[:0]
	measuring.Store(true)
	mu.Unlock()
	start := time.Now()
	time.Sleep(cfg.Duration)
	mu.Lock()
	stop.Store(true)
	r := run{lat: slices.Clone(lat)}
	mu.Unlock()
	elapsed := time.Since(start)
	after, err := take(c)
	counting.Store(false)
	cancel()
	wg.Wait()
	if err != nil {
		return run{}, err
	}
	if firstErr != nil {
		return run{}, firstErr
	}
	n := float64(len(r.lat))
	if n == 0 {
		return run{}, fmt.Errorf("no hand-over in %v", cfg.Duration)
	}
	r.perSecond = n / elapsed.Seconds()
	// The snapshots take a while on a loaded machine, and the hand-overs
	// go on meanwhile: count them too (the snapshots are not atomic, so
	// a hand-over or two at each end may fall on the wrong side).
	handovers := float64(taken.Load())
	r.requests = (after.requests - before.requests) / handovers
	r.notifications = (after.events - before.events) / handovers
	return r, nil
}

// spin busy-waits for d.
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

func percentile(lat []time.Duration, p int) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// median returns the row of the median repetition by rate, with the other
// figures of their own medians.
func median(sc, contender string, runs []run) Row {
	row := Row{Scenario: sc, Contender: contender}
	if len(runs) == 0 {
		return row
	}
	pick := func(f func(run) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	row.PerSecond = pick(func(r run) float64 { return r.perSecond })
	row.P50 = time.Duration(pick(func(r run) float64 { return float64(percentile(r.lat, 50)) }))
	row.P99 = time.Duration(pick(func(r run) float64 { return float64(percentile(r.lat, 99)) }))
	row.Requests = pick(func(r run) float64 { return r.requests })
	row.Notifications = pick(func(r run) float64 { return r.notifications })
	for _, r := range runs {
		row.Ops += len(r.lat)
	}
	return row
}

// Markdown formats rows as the report's table.
func Markdown(rows []Row, cfg Config) string {
	s := fmt.Sprintf("etcd 3-member cluster (Debian etcd-server, testenv: 50ms heartbeat, 500ms election timeout), "+
		"%v per run, %d repetition(s), medians; E2: %d clients, hold %v of busy work.\n\n", cfg.Duration, cfg.Reps, cfg.Clients, cfg.Hold)
	s += "| scenario | contender | per second | p50 | p99 | requests | watch notifications | measured |\n|---|---|---|---|---|---|---|---|\n"
	for _, r := range rows {
		unit := "cycles"
		if r.Scenario == "E2" {
			unit = "hand-overs"
		}
		s += fmt.Sprintf("| %s | %s | %.0f | %v | %v | %.2f | %.2f | %d %s |\n", r.Scenario, r.Contender, r.PerSecond,
			r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.Requests, r.Notifications, r.Ops, unit)
	}
	return s
}
