package lockbench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// s5: FairMutex against the plain Mutex, S3's setup.
func (r *Results) s5(b *strings.Builder) []check {
	const fair, plain = "dlock-fair-goredis", "dlock-goredis"
	var rows [][]string
	var checks []check
	for _, c := range S5Contenders() {
		if !r.has("S5", c.Name) {
			continue
		}
		p50, p99, call := r.med("S5", c.Name, "handoff_p50"), r.med("S5", c.Name, "handoff_p99"), r.med("S5", c.Name, "handoff_call")
		lo, hi := r.med("S5", c.Name, "share_min"), r.med("S5", c.Name, "share_max")
		x, xCall := "base", "base"
		if c.Name == fair {
			x, xCall = fmtX(ratio(p50, r.med("S5", plain, "handoff_p50"))), fmtX(r.rel("S5", fair, plain, "handoff_call"))
		}
		rows = append(rows, []string{c.Name, fmtDur(p50), x, fmtDur(p99), fmtDur(call), xCall,
			fmtF(100*r.med("S5", c.Name, "handoff_share"), 0) + "%", fmtInt(r.med("S5", c.Name, "acq_s")),
			fmtF(r.med("S5", c.Name, "cmds_client"), 1), fmtF(r.med("S5", c.Name, "cmds_all"), 1),
			fmtDur(r.med("S5", c.Name, "srv_cpu_acq")),
			fmtF(lo, 2) + "–" + fmtF(hi, 2), fmtInt(r.med("S5", c.Name, "overlaps")), fmtInt(r.med("S5", c.Name, "failures"))})
	}
	fmt.Fprintf(b, "### S5 — fair hand-over: %d independent clients on one key (S3's setup, hold %s busy work)\n\n", r.cfg.Clients, r.cfg.Hold)
	table(b, []string{"contender", "handoff p50", "× Mutex", "handoff p99", "p50 from Release call", "× Mutex (per rep)",
		"hand-overs", "acq/s", "client-sent cmds/acq (commandstats − Lua-internal)", "server cmds/acq (total_commands_processed, incl. Lua-internal)",
		"server CPU/acq", "share min–max (× fair)", "overlaps", "failed Lock/Release"}, rows)
	for _, c := range S5Contenders() {
		if bd := r.breakdown("S5", c.Name); bd != "" {
			fmt.Fprintf(b, "Client-sent commands per acquisition by name, %s (median over reps; includes connection setup and 8 warm-up cycles): %s\n\n", c.Name, bd)
		}
	}
	if !r.has("S5", fair) || !r.has("S5", plain) {
		return nil
	}
	p50, base := r.med("S5", fair, "handoff_p50"), r.med("S5", plain, "handoff_p50")
	okP50 := p50 <= 2*base // literal, as S3's
	xCall := r.rel("S5", fair, plain, "handoff_call")
	sent, all := r.med("S5", fair, "cmds_client"), r.med("S5", fair, "cmds_all")
	lo, hi := r.med("S5", fair, "share_min"), r.med("S5", fair, "share_max")
	sw := r.med("S5", fair, "handoff_share")
	fifo := lo >= 0.9 && hi <= 1.1 && sw >= 0.95
	checks = append(checks,
		check{"S5 " + fair + " handoff p50 ≤ 2× plain Mutex's (from Release returning)", fmt.Sprintf("%s vs 2 × %s", fmtDur(p50), fmtDur(base)), okP50},
		check{"S5 " + fair + " same, clock started at the Release call (per-repetition ratio)", fmt.Sprintf("%s (%s vs %s)", fmtX(xCall),
			fmtDur(r.med("S5", fair, "handoff_call")), fmtDur(r.med("S5", plain, "handoff_call"))), xCall <= 2},
		check{"S5 " + fair + " ≤ 5 commands/acquisition, counted as client-sent (commandstats minus Lua-internal)", fmtF(sent, 1), sent <= 5},
		check{"S5 " + fair + " ≤ 5 commands/acquisition, counted as total_commands_processed (incl. Lua-internal)", fmtF(all, 1), all <= 5},
		check{"S5 " + fair + " FIFO-ish: every share within 0.9–1.1× fair and ≥ 95% of acquisitions change client", fmt.Sprintf("%s–%s, %s%% hand-overs (Mutex: %s–%s, %s%%)",
			fmtF(lo, 2), fmtF(hi, 2), fmtF(100*sw, 0), fmtF(r.med("S5", plain, "share_min"), 2), fmtF(r.med("S5", plain, "share_max"), 2),
			fmtF(100*r.med("S5", plain, "handoff_share"), 0)), fifo},
		check{"S5 " + fair + " no overlapping holdings", fmtInt(r.med("S5", fair, "overlaps")), r.med("S5", fair, "overlaps") == 0})
	return checks
}

// s6: RWMutex against a plain Mutex, 90% reads.
func (r *Results) s6(b *strings.Builder) []check {
	const rw, plain = "dlock-rw-goredis", "dlock-mutex-goredis"
	var rows [][]string
	for _, c := range S6Contenders() {
		if !r.has("S6", c.Name) {
			continue
		}
		x := "base"
		if c.Name == rw {
			x = fmtX(r.rel("S6", rw, plain, "read_s"))
		}
		xs := "base"
		if c.Name == rw {
			xs = fmtX(r.rel("S6", rw, plain, "read_s_sleep"))
		}
		rows = append(rows, []string{c.Name, fmtInt(r.med("S6", c.Name, "read_s")), x, fmtInt(r.med("S6", c.Name, "write_s")),
			fmtInt(r.med("S6", c.Name, "acq_s")), fmtF(r.med("S6", c.Name, "redis_cmds_all"), 1), fmtDur(r.med("S6", c.Name, "srv_cpu")),
			fmtDur(r.med("S6", c.Name, "hold")), fmtF(r.med("S6", c.Name, "conc"), 2),
			fmtInt(r.med("S6", c.Name, "read_s_sleep")), xs, fmtInt(r.med("S6", c.Name, "write_s_sleep")), fmtDur(r.med("S6", c.Name, "hold_sleep")),
			fmtF(r.med("S6", c.Name, "conc_sleep"), 2),
			fmtInt(r.med("S6", c.Name, "failures") + r.med("S6", c.Name, "failures_sleep"))})
	}
	fmt.Fprintf(b, "### S6 — read-write: %d independent clients on one name, %.0f%% reads, hold %s busy work\n\n", S6Clients, 100*S6ReadShare, S6Hold)
	table(b, []string{"contender", "read acq/s (spin hold)", "× Mutex (per rep)", "write acq/s", "all acq/s", "server cmds/acq (incl. Lua)", "server CPU/acq", "mean hold", "mean holders at once",
		"read acq/s (sleep hold, informative)", "× Mutex", "write acq/s (sleep)", "mean hold (sleep)", "mean holders at once (sleep)", "failed Lock/Release"}, rows)
	if !r.has("S6", rw) || !r.has("S6", plain) {
		return nil
	}
	x := r.rel("S6", rw, plain, "read_s")
	return []check{{"S6 " + rw + " read acquisitions/s ≥ 3× plain Mutex's (hold = busy work)", fmt.Sprintf("%s (%s vs %s)", fmtX(x),
		fmtInt(r.med("S6", rw, "read_s")), fmtInt(r.med("S6", plain, "read_s"))), x >= 3}}
}

// r2: reentrant re-acquire by the holding owner.
func (r *Results) r2(b *strings.Builder) []check {
	if !r.has("R2", R2Name) {
		return nil
	}
	m := func(k string) float64 { return r.med("R2", R2Name, k) }
	var xs []float64
	for _, run := range r.runs["R2"][R2Name] {
		if run != nil {
			xs = append(xs, ratio(run["reenter_p50"], run["try_p50"]))
		}
	}
	xTry := median(xs)
	var maxRT, notOne float64
	for _, run := range r.runs["R2"][R2Name] {
		if run != nil {
			maxRT, notOne = math.Max(maxRT, run["rt_max"]), notOne+run["not_one"]
		}
	}
	okRT := maxRT == 1 && notOne == 0
	okLat := xTry <= 1.5
	b.WriteString("### R2 — reentrant re-acquire by the owner: `rm.Lock(outerLease.Context())`\n\n")
	table(b, []string{"measure", "value"}, [][]string{
		{"re-entries measured (median per rep)", fmtInt(m("calls"))},
		{"round trips per re-entry (Eval calls on the Conn): mean / max over all reps", fmtF(m("rt_mean"), 3) + " / " + fmtInt(maxRT)},
		{"re-entries that took ≠ 1 round trip (all reps)", fmtInt(notOne)},
		{"re-entry fence ≠ outer fence (all reps must be 0)", fmtInt(m("fence_diff"))},
		{"re-entry p50 / p99", fmtDur(m("reenter_p50")) + " / " + fmtDur(m("reenter_p99"))},
		{"plain Mutex TryLock, uncontended, p50 / p99", fmtDur(m("try_p50")) + " / " + fmtDur(m("try_p99"))},
		{"go-redis PING p50 (one bare RTT)", fmtDur(m("ping_p50"))},
		{"re-entry p50 ÷ TryLock p50 (per rep)", fmtX(xTry)},
		{"re-entry p50 ÷ PING p50", fmtX(ratio(m("reenter_p50"), m("ping_p50")))},
	})
	return []check{
		{"R2 re-entry takes exactly 1 round trip (every call)", fmt.Sprintf("max %s, %s calls ≠ 1", fmtInt(maxRT), fmtInt(notOne)), okRT},
		{"R2 re-entry p50 close to one RTT: ≤ 1.5× an uncontended TryLock's p50", fmt.Sprintf("%s (%s vs %s; PING %s)", fmtX(xTry),
			fmtDur(m("reenter_p50")), fmtDur(m("try_p50")), fmtDur(m("ping_p50"))), okLat},
	}
}

func (r *Results) issue4Notes(b *strings.Builder) {
	if r.runs["S5"] == nil && r.runs["S6"] == nil && r.runs["R2"] == nil {
		return
	}
	b.WriteString("### S5, S6, R2: contenders and definitions\n\n")
	for _, c := range r.issue4 {
		if r.runs["S5"][c.Name] != nil || r.runs["S6"][c.Name] != nil || r.runs["R2"][c.Name] != nil {
			fmt.Fprintf(b, "- **%s**: %s\n", c.Name, c.Config)
		}
	}
	fmt.Fprintf(b, `
- **S5** is S3 exactly (same code: %d clients, one key, %s busy hold, Release then Lock at once, same hand-over
  analysis and commandstats counting) for the FairMutex and the plain Mutex, interleaved in the same repetitions
  after a discarded warm-up run. "× Mutex" for the p50 from Release returning is the ratio of medians (it can be
  negative or near zero); the target is read literally (fair p50 ≤ 2 × Mutex p50). Commands are counted twice:
  *client-sent* (commandstats deltas minus every command dlock's Lua scripts run inside Redis, and INFO) and
  *server* (total_commands_processed, which on this Redis counts Lua-internal commands too). *FIFO-ish* is
  judged by share spread (every client within 0.9–1.1× of an equal share) and hand-overs (≥ 95%% of consecutive
  acquisitions change client; strict FIFO over %d always-waiting clients is round-robin).
- **S6**: %d clients (each its own Redis client and lock client) loop on one name: with probability %.2f (per-client
  PCG stream) a read lock, else a write lock, by blocking Lock; %s busy work; Release. Counted: acquisitions
  returned before the run's end, by side, ÷ duration; *mean hold* = time from Lock returning to Release being
  called, averaged. The Mutex baseline takes the same Mutex for both sides. Each run is done twice, back to back
  (FLUSHALL between): hold as busy work (the scenario and its target) and hold as time.Sleep (informative only,
  not a target: the sleep's real length differs between contenders — with every goroutine blocked, as under the
  Mutex, Go's timer wake-up from an idle netpoll is coarse — so compare *mean hold* before reading its ratio).
  *mean holders at once* = total time held ÷ duration (≤ 1 for a Mutex; above 1 only when readers overlap).
  Busy work is a spin: concurrent readers need a CPU each, so on a machine with few cores (this one has
  GOMAXPROCS as in the header, shared with redis-server) reader parallelism is capped by cores, not by the lock.
- **R2**: one client's ReentrantMutex is held (outer lease, re-taken every second so that no renewal lands on
  the counting Conn mid-call); each iteration times %s, counts Eval calls on the Conn
  wrapper around it (one Eval = one round trip), releases the inner hold and checks the outer is still held;
  then times an uncontended plain Mutex TryLock on a fresh key (second client) and a go-redis PING (third client).
  200 untimed iterations first.

`, r.cfg.Clients, r.cfg.Hold, r.cfg.Clients, S6Clients, S6ReadShare, S6Hold, "`rm.Lock(outer.Context())`")
}

// breakdown lists the cmd_<name> metrics of a contender, largest first.
func (r *Results) breakdown(sc, name string) string {
	keys := map[string]bool{}
	for _, m := range r.runs[sc][name] {
		for k := range m {
			if strings.HasPrefix(k, "cmd_") {
				keys[k] = true
			}
		}
	}
	type kv struct {
		k string
		v float64
	}
	var list []kv
	for k := range keys {
		var v []float64
		for _, m := range r.runs[sc][name] {
			if m != nil {
				v = append(v, m[k]) // absent in a run: 0
			}
		}
		list = append(list, kv{strings.TrimPrefix(k, "cmd_"), median(v)})
	}
	slices.SortFunc(list, func(a, b kv) int { return cmp.Compare(b.v, a.v) })
	var parts []string
	for _, e := range list {
		if e.v >= 0.005 {
			parts = append(parts, fmt.Sprintf("%s %s", strings.ToUpper(e.k), fmtF(e.v, 2)))
		}
	}
	return strings.Join(parts, ", ")
}
