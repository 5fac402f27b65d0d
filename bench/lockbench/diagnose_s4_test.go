package lockbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/redis/go-redis/v9"
)

// TestDiagnoseS4 takes S4's numbers apart (LOCKBENCH_DIAG=1):
//
//	cd bench && LOCKBENCH_DIAG=1 go test -v -run DiagnoseS4 ./lockbench
//
// Between raw-parallel and dlock's Redlock sit three differences: dlock's
// Lua scripts instead of SET NX and a small delete script, a third fan-out
// (the fence write), and dlock's client code; and one that favours dlock:
// it waits for a quorum, not for all nodes, to acquire. Straight go-redis
// clients running dlock's own scripts with the same fan-outs, with and
// without the fence, separate them. Each variant runs many short
// interleaved S4a and S4b runs; process and redis CPU per cycle (the five
// nodes together) show which side a run is bound by.
func TestDiagnoseS4(t *testing.T) {
	if testing.Short() {
		t.Skip("diagnostics")
	}
	needDiagEnv(t)
	ns, err := startNodes(RedlockNodes)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.close()
	variant := func(name string, open func(addrs []string) (Client, error)) Contender {
		return Contender{Name: name, OpenNodes: open}
	}
	cs := []Contender{
		rawParallelContender(),
		variant("raw SET, acquire waits for 3 of 5", func(a []string) (Client, error) { return openFanClient(a, fanRawSet, false) }),
		variant("dlock scripts, no fence", func(a []string) (Client, error) { return openFanClient(a, fanScripts, false) }),
		variant("dlock scripts + fence", func(a []string) (Client, error) { return openFanClient(a, fanScripts, true) }),
		dlockRedlock("goredis"), dlockRedlock("rueidis"), redsyncRedlock(true),
	}
	cfg := DefaultConfig()
	cfg.RedlockDuration, cfg.Warmup = 300*time.Millisecond, 50*time.Millisecond
	for _, part := range []string{"S4a", "S4b"} {
		ratios, client, server := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
		for rep := range 9 {
			ops := map[string]float64{}
			for i := range cs {
				c := cs[(i+rep)%len(cs)]
				c0, s0 := processCPU(), ns.cpu()
				m, err := runS4Part(part, c, ns, cfg)
				if err != nil {
					t.Fatal(c.Name, err)
				}
				// CPU includes the warm-up; count its cycles at the measured rate.
				n := m["ops"] * (cfg.s4Duration() + cfg.Warmup).Seconds()
				client[c.Name] = append(client[c.Name], float64(processCPU()-c0)/n)
				server[c.Name] = append(server[c.Name], float64(ns.cpu()-s0)/n)
				ops[c.Name] = m["ops"]
			}
			for k, v := range ops {
				ratios[k] = append(ratios[k], v/ops["raw-parallel"])
			}
		}
		for _, c := range cs {
			t.Logf("%s %-36s %.2f× raw-parallel   process CPU/cycle %5.1fµs   redis CPU/cycle (5 nodes) %5.1fµs", part, c.Name,
				median(ratios[c.Name]), median(client[c.Name])/1e3, median(server[c.Name])/1e3)
		}
	}
}

// TestDiagnoseS4Latency runs S4a with network latency added by testenv
// proxies (LOCKBENCH_DIAG=1): first on 2 of the 5 nodes (a slow minority,
// where deciding at a quorum pays), then on all 5 (every phase pays the
// round trip: latency-bound, not CPU-bound).
func TestDiagnoseS4Latency(t *testing.T) {
	needDiagEnv(t)
	ns, err := startNodes(RedlockNodes)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.close()
	direct := ns.addrs()
	cs := []Contender{rawParallelContender(), dlockRedlock("goredis"), dlockRedlock("rueidis"), redsyncRedlock(true), redsyncRedlock(false)}
	cfg := DefaultConfig()
	cfg.RedlockDuration, cfg.Warmup = 400*time.Millisecond, 50*time.Millisecond
	const oneWay = 250 * time.Microsecond
	for _, slow := range []int{2, 5} {
		ns.front = slices.Clone(direct)
		for i := range slow {
			p, err := testenv.NewProxy(direct[i])
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			p.SetLatency(oneWay)
			ns.front[i] = p.Addr()
		}
		ratios, p50s := map[string][]float64{}, map[string][]float64{}
		for rep := range 5 {
			ops := map[string]float64{}
			for i := range cs {
				c := cs[(i+rep)%len(cs)]
				m, err := runS4Part("S4a", c, ns, cfg)
				if err != nil {
					t.Fatal(c.Name, err)
				}
				ops[c.Name] = m["ops"]
				p50s[c.Name] = append(p50s[c.Name], m["p50"])
			}
			for k, v := range ops {
				ratios[k] = append(ratios[k], v/ops["raw-parallel"])
			}
		}
		for _, c := range cs {
			t.Logf("S4a, +%v each way on %d of 5 nodes: %-22s %.2f× raw-parallel   p50 cycle %s", oneWay, slow, c.Name,
				median(ratios[c.Name]), fmtDur(median(p50s[c.Name])))
		}
	}
	ns.front = nil
}

func needDiagEnv(t *testing.T) {
	t.Helper()
	if os.Getenv("LOCKBENCH_DIAG") == "" {
		t.Skip("set LOCKBENCH_DIAG=1 to run")
	}
}

const (
	fanRawSet  = iota // SET NX PX + compare-and-delete, acquire on a quorum
	fanScripts        // dlock's quorum_acquire / quorum_fence / release
)

// fanClient is dlock's Redlock protocol (or the raw one) written straight
// on go-redis: one goroutine per node per fan-out, acquire decided at the
// quorum-th vote (the rest drained in the background), fence on the voters
// and waited for, release on every node and waited for.
type fanClient struct {
	rdbs  []*redis.Client
	kind  int
	fence bool
	del   string // raw compare-and-delete SHA
}

func openFanClient(addrs []string, kind int, fence bool) (Client, error) {
	c := &fanClient{kind: kind, fence: fence}
	for _, a := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: a})
		c.rdbs = append(c.rdbs, rdb)
		ctx := context.Background()
		var err error
		for _, s := range []*redisscript.Script{redisscript.QuorumAcquire, redisscript.QuorumFence, redisscript.Release} {
			if err == nil {
				err = rdb.ScriptLoad(ctx, s.Src).Err()
			}
		}
		if err == nil {
			c.del, err = rdb.ScriptLoad(ctx, rawReleaseSrc).Result()
		}
		if err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

type fanReply struct {
	node int
	val  any
	err  error
}

func (c *fanClient) fan(only []int, f func(rdb *redis.Client) (any, error)) <-chan fanReply {
	if only == nil {
		only = []int{0, 1, 2, 3, 4}[:len(c.rdbs)]
	}
	out := make(chan fanReply, len(only))
	for _, i := range only {
		go func() {
			v, err := f(c.rdbs[i])
			out <- fanReply{i, v, err}
		}()
	}
	return out
}

func (c *fanClient) Lock(ctx context.Context, key string) (Release, error) {
	n, quorum := len(c.rdbs), len(c.rdbs)/2+1
	token := dlock.NewToken()
	lock, fenceKey := "dlock:{"+key+"}", "dlock:{"+key+"}:fence"
	var replies <-chan fanReply
	if c.kind == fanRawSet {
		replies = c.fan(nil, func(rdb *redis.Client) (any, error) {
			err := rdb.Do(ctx, "SET", lock, token, "NX", "PX", "10000").Err()
			return err == nil, err
		})
	} else {
		replies = c.fan(nil, func(rdb *redis.Client) (any, error) { // ARGV[3]: the restart window, 10s
			return rdb.EvalSha(ctx, redisscript.QuorumAcquire.SHA1, []string{lock, fenceKey, "dlock:epoch"}, token, "10000", "10000").Result()
		})
	}
	var (
		voters   []int
		answered int
		counter  int64
		timeUS   int64
	)
	for answered < n && len(voters) < quorum {
		r := <-replies
		answered++
		switch v := r.val.(type) {
		case bool:
			if v {
				voters = append(voters, r.node)
			}
		case []any:
			if v[0].(int64) == 1 {
				voters = append(voters, r.node)
			}
			counter, timeUS = max(counter, v[1].(int64)), max(timeUS, v[2].(int64))
		}
	}
	go func() {
		for range n - answered {
			<-replies
		}
	}()
	if len(voters) < quorum {
		return nil, errors.New("no quorum")
	}
	if c.fence {
		f := strconv.FormatInt(max(counter+1, timeUS), 10)
		fr := c.fan(voters, func(rdb *redis.Client) (any, error) {
			return rdb.EvalSha(ctx, redisscript.QuorumFence.SHA1, []string{lock, fenceKey}, token, f).Result()
		})
		for range voters {
			if r := <-fr; r.err != nil {
				return nil, r.err
			}
		}
	}
	return func(ctx context.Context) error {
		rr := c.fan(nil, func(rdb *redis.Client) (any, error) {
			if c.kind == fanRawSet {
				return rdb.EvalSha(ctx, c.del, []string{lock}, token).Result()
			}
			return rdb.EvalSha(ctx, redisscript.Release.SHA1, []string{lock}, token, lock+":released").Result()
		})
		var errs []error
		for range n {
			if r := <-rr; r.err != nil {
				errs = append(errs, fmt.Errorf("node %d: %w", r.node, r.err))
			}
		}
		return errors.Join(errs...)
	}, nil
}

func (c *fanClient) Close() error {
	for _, rdb := range c.rdbs {
		rdb.Close()
	}
	return nil
}
