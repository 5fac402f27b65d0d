package lockbench

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/dlock-go/dlock/internal/servers"
)

// nodes are S4's independent redis-servers, each started like server
// (127.0.0.1, a free port, no persistence).
type nodes struct {
	rs      []*servers.Redis
	version string
	front   []string // if set, the addresses clients dial instead (diagnostics: latency proxies)
}

func startNodes(n int) (*nodes, error) {
	ns := &nodes{rs: make([]*servers.Redis, n)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { ns.rs[i], errs[i] = servers.LaunchRedis(servers.RedisConfig{}) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		ns.close()
		return nil, err
	}
	info, err := ns.rs[0].Do("INFO", "server")
	if err != nil {
		ns.close()
		return nil, err
	}
	ns.version = infoFields(info)["redis_version"]
	return ns, nil
}

func (ns *nodes) addrs() []string {
	if ns.front != nil {
		return ns.front
	}
	a := make([]string, len(ns.rs))
	for i, r := range ns.rs {
		a[i] = r.Addr()
	}
	return a
}

func (ns *nodes) close() {
	for _, r := range ns.rs {
		if r != nil {
			r.Close()
		}
	}
}

// epochAge is how old the benchmark makes each node's dlock epoch.
const epochAge = time.Hour

// reset empties every node (FLUSHALL; scripts stay loaded) and pre-ages it
// for dlock's restart detection: it writes the epoch hash dlock's
// quorum_acquire script keeps, saying that the node's data began and its
// server started epochAge ago, at the LASTSAVE it reads now, so that a
// node votes at once as if it had been in service for an hour. Without it
// a node the benchmark has just started abstains for the restart window.
func (ns *nodes) reset() error {
	created := strconv.FormatInt(time.Now().Add(-epochAge).UnixMilli(), 10)
	for _, r := range ns.rs {
		if _, err := r.Do("FLUSHALL"); err != nil {
			return err
		}
		saved, err := r.Do("LASTSAVE")
		if err != nil {
			return err
		}
		if _, err := r.Do("HSET", "dlock:epoch", "created", created, "boot", created, "seen", saved); err != nil {
			return err
		}
	}
	return nil
}

// cpu returns the user+system CPU time of all nodes together.
func (ns *nodes) cpu() time.Duration {
	var t time.Duration
	for _, r := range ns.rs {
		t += pidCPU(r.PID())
	}
	return t
}

// commands returns total_commands_processed summed over the nodes; each
// node counts the INFO that reads it after replying to it.
func (ns *nodes) commands() int64 {
	var n int64
	for _, r := range ns.rs {
		info, err := r.Do("INFO", "stats")
		if err != nil {
			return 0
		}
		c, _ := strconv.ParseInt(infoFields(info)["total_commands_processed"], 10, 64)
		n += c
	}
	return n
}
