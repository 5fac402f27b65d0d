package lockbench

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// These tests take dlock's numbers apart when a target fails. They run
// only with LOCKBENCH_DIAG=1:
//
//	cd bench && LOCKBENCH_DIAG=1 go test -v -run Diagnose ./lockbench

func needDiag(t *testing.T) *server {
	if os.Getenv("LOCKBENCH_DIAG") == "" {
		t.Skip("set LOCKBENCH_DIAG=1 to run")
	}
	srv, err := startServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.close() })
	return srv
}

// scriptClient runs given acquire and release scripts straight through
// go-redis, with dlock's keys and arguments but none of its client code.
type scriptClient struct {
	rdb      *redis.Client
	acq, rel string
}

func (s *scriptClient) Lock(ctx context.Context, key string) (Release, error) {
	tok, k := dlock.NewToken(), "dlock:{"+key+"}"
	if err := s.rdb.EvalSha(ctx, s.acq, []string{k, "dlock:fence:{" + key + "}"}, tok, "10000").Err(); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		return s.rdb.EvalSha(ctx, s.rel, []string{k}, tok, k+":released").Err()
	}, nil
}

func (s *scriptClient) Close() error { return s.rdb.Close() }

func scripted(name, acq, rel string) Contender {
	return Contender{Name: name, Open: func(addr string) (Client, error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		a, err := rdb.ScriptLoad(context.Background(), acq).Result()
		if err != nil {
			return nil, err
		}
		r, err := rdb.ScriptLoad(context.Background(), rel).Result()
		if err != nil {
			return nil, err
		}
		return &scriptClient{rdb: rdb, acq: a, rel: r}, nil
	}}
}

// acquireNoFence is acquire.lua without the fencing counter.
const acquireNoFence = `if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return -redis.call('PTTL', KEYS[1])`

// readScript reads one of dlock's Lua scripts from the library's source.
func readScript(t *testing.T, name string) string {
	for _, dir := range []string{"../../internal/redisscript/lua/", "../../redislock/scripts/"} {
		if b, err := os.ReadFile(dir + name); err == nil {
			return string(b)
		}
	}
	t.Fatalf("cannot find dlock's %s", name)
	return ""
}

// TestDiagnoseThroughput splits the S1 and S2 gap between raw and dlock
// into server-side script cost, renewal scheduling and other client code,
// with many short interleaved runs and process/server CPU per cycle.
func TestDiagnoseThroughput(t *testing.T) {
	srv := needDiag(t)
	acq, rel := readScript(t, "acquire.lua"), readScript(t, "release.lua")
	noRenew := Contender{Name: "dlock-goredis WithoutRenewal", Open: func(addr string) (Client, error) {
		return openDlock(addr, "goredis", nil, redislock.WithTTL(LockTTL), redislock.WithoutRenewal())
	}}
	// Is go-redis's pool (10 per GOMAXPROCS) S2's limit? The floor and
	// dlock, each with a connection per goroutine.
	raw64 := Contender{Name: "raw-goredis PoolSize 64", Open: func(addr string) (Client, error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
		sha, err := rdb.ScriptLoad(context.Background(), rawReleaseSrc).Result()
		return &rawClient{rdb: rdb, sha: sha, ttlMs: "10000"}, err
	}}
	dlock64 := Contender{Name: "dlock-goredis PoolSize 64", Open: func(addr string) (Client, error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
		return &dlockClient{c: redislock.New(goredisconn.New(rdb)), closeRdb: func() { rdb.Close() },
			opts: []redislock.Option{redislock.WithTTL(LockTTL)}, transport: "goredis"}, nil
	}}
	cs := []Contender{rawContender(), dlockGoRedis(), noRenew, dlockRueidis(), raw64, dlock64,
		scripted("go-redis + dlock's scripts", acq, rel),
		scripted("go-redis + acquire w/o fence", acquireNoFence, rel)}
	for _, sc := range []string{"S1", "S2"} {
		run := map[string]func(Contender, *server, Config) (Metrics, error){"S1": runS1, "S2": runS2}[sc]
		cfg := DefaultConfig()
		cfg.Duration, cfg.Warmup = 300*time.Millisecond, 50*time.Millisecond
		ratios, client, server := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
		for rep := range diagReps() {
			ops := map[string]float64{}
			for i := range cs {
				c := cs[(i+rep)%len(cs)]
				srv.flush()
				c0, s0 := processCPU(), srv.cpu()
				m, err := run(c, srv, cfg)
				if err != nil {
					t.Fatal(c.Name, err)
				}
				n := m["ops"] * cfg.Duration.Seconds()
				client[c.Name] = append(client[c.Name], float64(processCPU()-c0)/n)
				server[c.Name] = append(server[c.Name], float64(srv.cpu()-s0)/n)
				ops[c.Name] = m["ops"]
			}
			for k, v := range ops {
				ratios[k] = append(ratios[k], v/ops["raw-goredis"])
			}
		}
		for _, c := range cs {
			t.Logf("%s %-30s %.2f× raw   process CPU/cycle %5.1fµs   redis CPU/cycle %5.1fµs", sc, c.Name,
				median(ratios[c.Name]), median(client[c.Name])/1e3, median(server[c.Name])/1e3)
		}
	}
}

// diagReps is how many repetitions TestDiagnoseThroughput runs:
// LOCKBENCH_DIAG_REPS, or 15.
func diagReps() int {
	if n, err := strconv.Atoi(os.Getenv("LOCKBENCH_DIAG_REPS")); err == nil && n > 0 {
		return n
	}
	return 15
}

// TestDiagnoseS3Commands prints the commands per acquisition in S3 by name.
func TestDiagnoseS3Commands(t *testing.T) {
	srv := needDiag(t)
	cfg := DefaultConfig()
	cfg.Duration = 2 * time.Second
	for _, c := range []Contender{rawContender(), dlockGoRedis(), dlockRueidis(), rueidislockContender()} {
		srv.flush()
		before, _ := srv.snapshot()
		m, err := runS3(c, srv, cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		after, _ := srv.snapshot()
		var per []string
		for k, v := range after.calls {
			if d := float64(v-before.calls[k]) / m["acquisitions"]; d >= 0.01 && k != "info" {
				per = append(per, k+"="+fmtF(d, 2))
			}
		}
		slices.Sort(per)
		t.Logf("%-14s all %.1f, client-sent %.1f per acquisition: %s", c.Name, m["cmds_all"], m["cmds_client"], strings.Join(per, " "))
	}
}

// TestDiagnoseS3SubscriptionOrder makes dlock clients 1..7 subscribe to
// the release channel in that order, then runs the S3 loop: if a client's
// share falls with its subscription rank, the order in which Redis
// delivers a release notice decides who wins.
func TestDiagnoseS3SubscriptionOrder(t *testing.T) {
	srv := needDiag(t)
	for _, c := range []Contender{dlockGoRedis(), dlockRueidis()} {
		clients, err := openAll(c, srv.addr(), 8)
		if err != nil {
			t.Fatal(err)
		}
		key := "order"
		first, err := clients[0].Lock(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		var queued sync.WaitGroup
		rels := make(chan Release, 8)
		for i := 1; i < 8; i++ {
			queued.Go(func() {
				if r, err := clients[i].Lock(context.Background(), key); err == nil {
					rels <- r
				}
			})
			time.Sleep(50 * time.Millisecond) // subscribed before the next one starts
		}
		first(context.Background())
		for range 7 {
			(<-rels)(context.Background())
		}
		queued.Wait()

		counts := make([]int, 8)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		var run sync.WaitGroup
		for id, cl := range clients {
			run.Go(func() {
				for ctx.Err() == nil {
					if r, err := cl.Lock(ctx, key); err == nil {
						spin(50 * time.Microsecond)
						r(context.Background())
						counts[id]++
					}
				}
			})
		}
		run.Wait()
		cancel()
		closeAll(clients)
		t.Logf("%s acquisitions by client (1..7 subscribed in that order, 0 last): %v", c.Name, counts)
	}
}
