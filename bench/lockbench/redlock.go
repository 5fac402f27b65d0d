package lockbench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redislock"
)

// S4's parts, in run order: S4a (1 goroutine), S4b (RedlockGoroutines
// goroutines), S4f (dlock's S4a cycle taken apart by a timing Conn).
var s4Parts = []string{"S4a", "S4b", "S4f"}

// runS4Part runs one part of S4 for one contender on fresh, pre-aged nodes.
func runS4Part(part string, c Contender, ns *nodes, cfg Config) (Metrics, error) {
	if err := ns.reset(); err != nil {
		return nil, err
	}
	switch part {
	case "S4a":
		cl, err := c.OpenNodes(ns.addrs())
		if err != nil {
			return nil, err
		}
		defer closeQuietly(cl)
		if err := warm(cl, "s4aw:", cfg.Warmup); err != nil {
			return nil, err
		}
		c0 := takeCPU(ns)
		m, err := serialCycles(cl, "s4a:", cfg.s4Duration())
		if err != nil {
			return nil, err
		}
		return c0.add(m, m["cycles"], ns), nil
	case "S4b":
		cl, err := c.OpenNodes(ns.addrs())
		if err != nil {
			return nil, err
		}
		defer closeQuietly(cl)
		var warmTo, to timeouts // the warm-up's are not the run's
		if _, err := hammer(cl, cfg.RedlockGoroutines, "s4bw:", time.Now().Add(cfg.Warmup), &warmTo); err != nil {
			return nil, err
		}
		c0 := takeCPU(ns)
		start := time.Now()
		n, err := hammer(cl, cfg.RedlockGoroutines, "s4b:", start.Add(cfg.s4Duration()), &to)
		elapsed := time.Since(start)
		if err != nil {
			return nil, err
		}
		return c0.add(to.put(Metrics{"ops": float64(n) / elapsed.Seconds()}), float64(n), ns), nil
	default:
		return runS4f(c.DlockTransport, ns.addrs(), cfg)
	}
}

// closeQuietly closes cl after the replies that contenders deciding at a
// quorum leave in flight have landed; closing under them makes go-redis log
// "Unexpected conn ... state changed by hook to CLOSED".
func closeQuietly(cl Client) {
	time.Sleep(5 * time.Millisecond)
	cl.Close()
}

// cpuSample is one reading of the CPU time used by this process, by the
// nodes, and by the whole machine.
type cpuSample struct {
	at                     time.Time
	process, nodes, system time.Duration
	commands               int64 // run by the nodes (see nodes.commands)
}

func takeCPU(ns *nodes) cpuSample {
	return cpuSample{at: time.Now(), process: processCPU(), nodes: ns.cpu(), system: systemCPU(), commands: ns.commands()}
}

// add stores in m, since s: this process's and the nodes' CPU time per
// cycle (process CPU counts every goroutine, background work included;
// node CPU is the nodes' threads' run time, see pidCPU), and the cores used meanwhile
// by everything else on the machine (other processes: noise).
func (s cpuSample) add(m Metrics, cycles float64, ns *nodes) Metrics {
	e := takeCPU(ns)
	if cycles > 0 {
		m["cpu_client"] = float64(e.process-s.process) / cycles
		m["cpu_redis"] = float64(e.nodes-s.nodes) / cycles
		m["redis_cmds_all"] = float64(e.commands-s.commands-int64(len(ns.rs))) / cycles // less the first sample's INFOs
	}
	if s.system > 0 {
		other := (e.system - s.system) - (e.process - s.process) - (e.nodes - s.nodes)
		m["cpu_other"] = max(0, float64(other)/float64(e.at.Sub(s.at)))
	}
	return m
}

// ---- S4f: where a dlock Redlock cycle spends its time ----

// Script classes recorded by timingConn.
const (
	scAcquire = iota // quorum_acquire
	scFence          // quorum_fence
	scRelease        // release
	scOther          // anything else (a renewal batch; none expected in S4f)
	scCount
)

func scriptClass(calls []redisconn.Call) uint8 {
	if len(calls) != 1 {
		return scOther
	}
	switch calls[0].Script.Name {
	case "quorum_acquire":
		return scAcquire
	case "quorum_fence":
		return scFence
	case "release":
		return scRelease
	}
	return scOther
}

// evalRec is one Eval on one node: when it entered and left the Conn, on
// the monotonic clock, relative to the recorder's base.
type evalRec struct {
	class      uint8
	start, end time.Duration
}

type evalRecorder struct {
	base time.Time
	mu   sync.Mutex
	recs []evalRec
}

func (r *evalRecorder) since() time.Duration { return time.Since(r.base) }

func (r *evalRecorder) add(e evalRec) {
	r.mu.Lock()
	r.recs = append(r.recs, e)
	r.mu.Unlock()
}

func (r *evalRecorder) take() []evalRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.recs
	r.recs = make([]evalRec, 0, 1<<16)
	return out
}

// timingConn times every Eval of one node's Conn.
type timingConn struct {
	redislock.Conn
	rec *evalRecorder
}

func (c *timingConn) Eval(ctx context.Context, calls []redisconn.Call, results []redisconn.Result) {
	start := c.rec.since()
	c.Conn.Eval(ctx, calls, results)
	c.rec.add(evalRec{class: scriptClass(calls), start: start, end: c.rec.since()})
}

// runS4f runs S4a's loop for dlock's Redlock client over transport with a
// timingConn on every node, and takes each cycle apart: Lock and Release
// as seen by the caller, and, from the Evals whose start falls in the
// cycle, the acquire fan-out up to the quorum-th reply, the fence fan-out
// and the release fan-out.
func runS4f(transport string, addrs []string, cfg Config) (Metrics, error) {
	rec := &evalRecorder{base: time.Now()}
	d, err := openRedlock(addrs, transport, func(_ int, c redislock.Conn) redislock.Conn { return &timingConn{Conn: c, rec: rec} })
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if err := warm(d, "s4fw:", cfg.Warmup); err != nil {
		return nil, err
	}
	quorum := d.c.Quorum()
	type cyc struct{ t0, t1, t2 time.Duration } // start, Lock returned, Release returned
	cycles := make([]cyc, 0, 1<<14)
	ctx := context.Background()
	rec.take()
	start := rec.since()
	end := start + cfg.s4Duration()
	for i := 0; ; i++ {
		t0 := rec.since()
		if t0 >= end {
			break
		}
		rel, err := d.Lock(ctx, "s4f:"+strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		t1 := rec.since()
		if err := rel(ctx); err != nil {
			return nil, err
		}
		cycles = append(cycles, cyc{t0, t1, rec.since()})
	}
	elapsed := rec.since() - start
	time.Sleep(5 * time.Millisecond) // let the last cycle's unawaited acquire replies land
	recs := rec.take()
	slices.SortFunc(recs, func(a, b evalRec) int { return cmp.Compare(a.start, b.start) })

	var (
		sum      = map[string]time.Duration{}
		evalSum  [scCount]time.Duration
		evalN    [scCount]int
		complete int // cycles whose acquire quorum and release were seen
	)
	if len(cycles) == 0 {
		return nil, fmt.Errorf("S4f: no cycle completed in %v", cfg.s4Duration())
	}
	j := 0
	for j < len(recs) && recs[j].start < cycles[0].t0 { // late warm-up replies
		j++
	}
	for i, c := range cycles {
		next := time.Duration(1<<62 - 1)
		if i+1 < len(cycles) {
			next = cycles[i+1].t0
		}
		var (
			ends      [scCount][]time.Duration
			first     [scCount]time.Duration
			last      [scCount]time.Duration
			firstSeen [scCount]bool
		)
		for ; j < len(recs) && recs[j].start < next; j++ {
			e := recs[j]
			evalSum[e.class] += e.end - e.start
			evalN[e.class]++
			ends[e.class] = append(ends[e.class], e.end)
			if !firstSeen[e.class] || e.start < first[e.class] {
				first[e.class], firstSeen[e.class] = e.start, true
			}
			last[e.class] = max(last[e.class], e.end)
		}
		sum["cycle"] += c.t2 - c.t0
		sum["lock"] += c.t1 - c.t0
		sum["release"] += c.t2 - c.t1
		// A cycle needs no fence round when the nodes' counters agree
		// (the grant then takes one round trip): it counts, with a fence
		// span of 0.
		if len(ends[scAcquire]) < quorum || !firstSeen[scRelease] {
			continue
		}
		complete++
		slices.Sort(ends[scAcquire])
		qEnd := ends[scAcquire][quorum-1]
		sum["c_cycle"] += c.t2 - c.t0
		sum["pre_acq"] += first[scAcquire] - c.t0
		sum["acq_quorum"] += qEnd - first[scAcquire]
		sum["after_quorum"] += c.t1 - qEnd
		if firstSeen[scFence] {
			sum["fence_span"] += last[scFence] - first[scFence]
			sum["fence_to_lock"] += c.t1 - last[scFence]
		} else {
			sum["fence_to_lock"] += c.t1 - qEnd
		}
		sum["release_span"] += last[scRelease] - first[scRelease]
	}
	if complete == 0 {
		return nil, fmt.Errorf("S4f: no complete cycle recorded (%d cycles)", len(cycles))
	}
	n, nc := float64(len(cycles)), float64(complete)
	m := Metrics{
		"ops":      n / elapsed.Seconds(),
		"cycles":   n,
		"complete": nc,
		"cycle":    float64(sum["cycle"]) / n,
		"lock":     float64(sum["lock"]) / n,
		"release":  float64(sum["release"]) / n,
	}
	for _, k := range []string{"pre_acq", "acq_quorum", "after_quorum", "fence_span", "fence_to_lock", "release_span"} {
		m[k] = float64(sum[k]) / nc
	}
	cCycle := float64(sum["c_cycle"]) / nc
	m["fence_frac"] = m["fence_span"] / cCycle
	m["after_quorum_frac"] = m["after_quorum"] / cCycle
	// The measured rate scaled to a cycle without the fence fan-out (lower
	// estimate: only the Evals' span removed) and without anything Lock does
	// after the quorum-th vote (upper estimate: the grant's bookkeeping,
	// which would remain, removed too).
	m["ops_nofence"] = m["ops"] * cCycle / (cCycle - m["fence_span"])
	m["ops_nofence_max"] = m["ops"] * cCycle / (cCycle - m["after_quorum"])
	for i, k := range []string{"acq", "fence", "rel", "other"} {
		m["evals_"+k] = float64(evalN[i]) / n
		m["eval_"+k] = float64(evalSum[i]) / float64(max(evalN[i], 1))
	}
	return m, nil
}
