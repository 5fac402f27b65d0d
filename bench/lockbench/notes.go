package lockbench

import (
	"fmt"
	"strings"
)

func (r *Results) notes(b *strings.Builder) {
	defer r.s4Notes(b)
	if !r.ranSingle() {
		return
	}
	b.WriteString("### How each contender was configured\n\n")
	for _, c := range r.contenders {
		fmt.Fprintf(b, "- **%s**: %s\n", c.Name, c.Config)
	}
	fmt.Fprintf(b, `
Every client is a separate Redis client with its own connection pool (go-redis default pool: 10 × GOMAXPROCS
connections; rueidis: one auto-pipelined connection). Lock TTL 10s where the caller chooses it.

### Definitions

- Before each of S1, S2 and S3 the floor runs once untimed and is discarded (a cold process or server
  otherwise penalises whichever contender comes first).
- **S1**: one goroutine; each cycle locks a fresh key and releases it; latency is one whole cycle.
  *server CPU/cycle* (and per acquisition, per round) = the redis-server's threads' run time over the timed part
  (/proc/<pid>/task/*/schedstat, in ns; /proc/<pid>/stat's 10ms ticks where the kernel keeps no schedstat) ÷ cycles.
- **L1**: S1 through internal/servers' fault proxy, which runs in this process and delays every chunk of data %s in
  each direction (the last 2ms of a delay slept in nanosleep, so sub-millisecond delays are kept); the floor,
  dlock over both transports, bsm/redislock and redsync, each on its own client of the proxy. *round trips/cycle* =
  the proxy's count of requests (data from the client after the server had answered, Proxy.Requests) ÷ cycles: the
  round trips a cycle made whatever each carried (the physical least for lock + release is 2). *client-sent
  cmds/cycle* = commandstats calls less the contender's Lua-internal commands. Before each repetition the PING round
  trip (go-redis, p50 of 200) is measured directly, through the proxy with no delay and with the delay; *added each
  way* = half the difference of the last two. Target (issue 35, 6): dlock's cycles/s ≥ %.2f× the floor's.
- **S2**: %d goroutines share one client; goroutine g locks keys s2:g:0, s2:g:1, …; after a %s concurrent warm-up.
- **S3**: %d clients (each its own Redis client and lock client) loop: blocking Lock on one key, %s busy work,
  Release, Lock again at once. All times are taken in this process on the monotonic clock. Holdings are ordered
  by acquisition (mutual exclusion orders them). For **every** release, *handoff* = time from that Release
  call returning to the next acquisition, in ownership order, by a **different** client (so a client that
  re-takes the lock it just released lengthens the handoff the others see). It is negative when the next
  client's Lock returned before the releaser's Release call did (the other client's request was already queued
  at the server and the releaser's goroutine had not run yet); its "× raw" is the ratio of the medians, n/a when
  the floor's median is not positive, and its target is read literally (p50 ≤ 1.5 × the floor's p50).
  *p50 from Release call* starts the clock when Release is called instead: never negative, so its per-repetition
  ratio is robust. *hand-overs* = share of consecutive acquisitions that changed client.
  *server cmds/acq (all)* = INFO stats total_commands_processed delta ÷ acquisitions; on Redis 7.0 this
  **counts the commands Lua scripts run** (checked: an EVAL running 3 redis.call adds 4).
  *client-sent cmds/acq* = INFO commandstats calls delta, minus the commands that contender's scripts run
  internally (and the benchmark's INFO), ÷ acquisitions: the commands the clients sent (EVALSHA, SET, SUBSCRIBE…).
  *share* = each client's acquisitions ÷ (total ÷ %d), min and max. *overlaps* = acquisitions that returned
  before the previous holder called Release (a safety violation; must be 0).
- **R1**: one dlock client takes %d leases (distinct keys, %s TTL, renewal on) with 64 goroutines, waits 1.5
  renewal periods, then measures %d periods: *round trips* = Eval calls on a counting wrapper of the Conn
  (each Eval is one pipeline), *process CPU* = getrusage(RUSAGE_SELF) user+sys delta, *redis CPU* =
  redis-server's run time (see S1), *heap alloc* = runtime.MemStats.TotalAlloc delta, all ÷ periods. *live heap/held
  lease* = HeapAlloc after a GC at the end of the measured periods, less that before the first Lock, ÷
  leases (the benchmark's slice of leases, 16 B each, and renewal batches in flight are counted; -r1-heapprofile
  FILE writes the heap profile of that moment; a TryLock that finds the server unavailable, or is not obtained (a
  grant that came too late, a lock an abandoned attempt took), is tried again every 100ms for up to 10s, as taking
  the leases is not what R1 measures). *least validity left* = the least time to Until() of any lease at
  the end. A lease is lost if its Err() is set or its Until() has passed at the end. Target: ≤ 2 × ⌈leases ÷ 4096⌉ round trips
  per period (batches of up to 4096; entries due within a quarter period share a batch) and none lost.
`, L1Latency, l1Target, r.cfg.Goroutines, r.cfg.Warmup, r.cfg.Clients, r.cfg.Hold, r.cfg.Clients, r.cfg.Leases, r.cfg.R1TTL, r.cfg.Rounds)
}

// ranSingle reports whether any of S1, S2, S3 and R1 ran.
func (r *Results) ranSingle() bool {
	for _, sc := range []string{"S1", "S2", "S3", "R1"} {
		if r.runs[sc] != nil {
			return true
		}
	}
	return false
}
