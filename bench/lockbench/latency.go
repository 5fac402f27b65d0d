package lockbench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dlock-go/dlock/internal/servers"
	"github.com/redis/go-redis/v9"
)

// L1Latency is the delay L1's proxy adds in each direction (issue 35,
// target 6).
const L1Latency = 500 * time.Microsecond

// l1Names are L1's contenders, the floor first.
var l1Names = []string{"raw-goredis", "dlock-goredis", "dlock-rueidis", "bsm/redislock", "redsync"}

// l1Group returns the selected contenders that L1 runs.
func l1Group(cs []Contender) []Contender {
	return slices.DeleteFunc(slices.Clone(cs), func(c Contender) bool { return !slices.Contains(l1Names, c.Name) })
}

// latencyProxy is L1's fault proxy (internal/servers) in front of the
// redis-server, adding L1Latency each way.
type latencyProxy struct{ p *servers.Proxy }

func startLatencyProxy(srv *server) (*latencyProxy, error) {
	p, err := servers.NewProxy(srv.addr())
	if err != nil {
		return nil, err
	}
	p.SetLatency(L1Latency)
	return &latencyProxy{p}, nil
}

func (lp *latencyProxy) close() error { return lp.p.Close() }

// measurePing measures PING round trips with a go-redis client through the
// proxy with no added latency and with L1Latency each way, and directly to
// the server: p50s of n each, and the added latency per direction that the
// difference of the p50s through the proxy gives.
func (lp *latencyProxy) measurePing(srv *server, n int) (Metrics, error) {
	ctx := context.Background()
	pings := func(addr string) (time.Duration, error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		d := make([]time.Duration, 0, n)
		for i := range n + 10 {
			t0 := time.Now()
			cctx, cancel := callContext(ctx)
			err := rdb.Ping(cctx).Err()
			cancel()
			if err != nil {
				return 0, fmt.Errorf("PING %s: %w", addr, err)
			}
			if i >= 10 { // the first ones dial
				d = append(d, time.Since(t0))
			}
		}
		return percentile(d, 0.5), nil
	}
	direct, err := pings(srv.addr())
	if err != nil {
		return nil, err
	}
	lp.p.SetLatency(0)
	bare, err := pings(lp.p.Addr())
	lp.p.SetLatency(L1Latency)
	if err != nil {
		return nil, err
	}
	delayed, err := pings(lp.p.Addr())
	if err != nil {
		return nil, err
	}
	return Metrics{"ping_direct": float64(direct), "ping_proxy0": float64(bare), "ping_proxy": float64(delayed),
		"added_each_way": float64(delayed-bare) / 2}, nil
}

// runL1 is S1 through the proxy: one goroutine, uncontended, a fresh key
// each cycle, with the server's commands and CPU and the round trips the
// client made through the proxy (Proxy.Requests) per cycle.
func runL1(c Contender, srv *server, lp *latencyProxy, cfg Config) (Metrics, error) {
	cl, err := c.Open(lp.p.Addr())
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if err := warm(cl, "l1w:", cfg.Warmup); err != nil {
		return nil, err
	}
	u0, err := srv.use()
	if err != nil {
		return nil, err
	}
	r0 := lp.p.Requests()
	m, err := serialCycles(cl, "l1:", cfg.Duration)
	if err != nil {
		return nil, err
	}
	m["round_trips"] = ratio(float64(lp.p.Requests()-r0), m["cycles"])
	return m, srv.addUse(u0, c.LuaInternal, m["cycles"], m)
}
