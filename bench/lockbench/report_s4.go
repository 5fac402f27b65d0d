package lockbench

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
)

// relAcross is rel across two scenarios: the median over repetitions of
// a's metric ka divided by b's metric kb in the same repetition.
func (r *Results) relAcross(scA, a, ka, scB, b, kb string) float64 {
	var v []float64
	x, y := r.runs[scA][a], r.runs[scB][b]
	for i := range min(len(x), len(y)) {
		if x[i] != nil && y[i] != nil && y[i][kb] > 0 {
			v = append(v, x[i][ka]/y[i][kb])
		}
	}
	return median(v)
}

// quietOther is the foreign CPU (cores) below which a run counts as quiet.
const quietOther = 0.25

// quietRel is rel over the repetitions in which both runs were quiet; it
// returns the ratio and how many repetitions it used.
func (r *Results) quietRel(sc, a, b, k string) (float64, int) {
	var v []float64
	x, y := r.runs[sc][a], r.runs[sc][b]
	for i := range min(len(x), len(y)) {
		if x[i] != nil && y[i] != nil && y[i][k] > 0 && x[i]["cpu_other"] < quietOther && y[i]["cpu_other"] < quietOther {
			v = append(v, x[i][k]/y[i][k])
		}
	}
	return median(v), len(v)
}

// withQuiet formats an all-repetition ratio followed by its quiet-only one.
func (r *Results) withQuiet(sc, a, b string) string {
	q, n := r.quietRel(sc, a, b, "ops")
	return fmt.Sprintf("%s (quiet reps: %s, %d of %d)", fmtX(r.rel(sc, a, b, "ops")), fmtX(q), n, r.cfg.Reps)
}

// s4Floor is the name of the S4 floor.
func (r *Results) s4Floor() string {
	for _, c := range r.redlock {
		if c.Floor {
			return c.Name
		}
	}
	return ""
}

// s4Peers are the S4 contenders that are neither the floor nor dlock.
func (r *Results) s4Peers(sc string) []string {
	var out []string
	for _, c := range r.redlock {
		if !c.Floor && c.DlockTransport == "" && r.has(sc, c.Name) {
			out = append(out, c.Name)
		}
	}
	return out
}

func (r *Results) s4(b *strings.Builder) []check {
	floor := r.s4Floor()
	var checks []check
	fmt.Fprintf(b, "### S4 — Redlock over %d independent redis-server nodes\n\n", RedlockNodes)
	var other []float64
	for _, sc := range []string{"S4a", "S4b"} {
		for _, runs := range r.runs[sc] {
			for _, m := range runs {
				if m != nil {
					other = append(other, m["cpu_other"])
				}
			}
		}
	}
	if len(other) > 0 {
		quiet := 0
		for _, o := range other {
			if o < quietOther {
				quiet++
			}
		}
		fmt.Fprintf(b, "CPU used by other processes on this %d-core machine during the timed S4a/S4b runs: median %s, "+
			"max %s cores; %d of %d runs quiet (< %.2f cores). Targets are judged on all repetitions; the ratio over the "+
			"repetitions in which both runs were quiet is shown next to it.\n\n",
			runtime.NumCPU(), fmtF(median(other), 2), fmtF(slices.Max(other), 2), quiet, len(other), quietOther)
	}

	// S4a
	var rows [][]string
	for _, c := range r.redlock {
		if !r.has("S4a", c.Name) {
			continue
		}
		x := r.rel("S4a", c.Name, floor, "ops")
		var t []string
		if c.Floor {
			t = append(t, "floor")
		}
		if c.DlockTransport != "" {
			ok := x >= 1.2
			t = append(t, "≥ 1.2× raw "+passFail(ok))
			checks = append(checks, check{"S4a " + c.Name + " cycles/s ≥ 1.2× raw-parallel", r.withQuiet("S4a", c.Name, floor), ok})
			if r.has("S4a", "redsync-failfast") {
				v := r.rel("S4a", c.Name, "redsync-failfast", "ops")
				ok := v > 1
				t = append(t, fmt.Sprintf("÷ redsync-failfast = %s (> 1×) %s", fmtX(v), passFail(ok)))
				checks = append(checks, check{"S4a " + c.Name + " cycles/s ahead of redsync WithFailFast(true)", r.withQuiet("S4a", c.Name, "redsync-failfast"), ok})
			}
		}
		rows = append(rows, append([]string{c.Name, fmtInt(r.med("S4a", c.Name, "ops")), fmtX(x),
			fmtDur(r.med("S4a", c.Name, "p50")), fmtDur(r.med("S4a", c.Name, "p99"))},
			append(r.cpuCols("S4a", c.Name), strings.Join(t, "<br>"))...))
	}
	b.WriteString("#### S4a — 1 goroutine, fresh key per cycle (lock + release)\n\n")
	table(b, []string{"contender", "cycles/s", "× raw-parallel", "p50 cycle", "p99 cycle", "process CPU/cycle",
		"redis CPU, commands/cycle (5 nodes, incl. Lua)", "CPU/cycle total → cores busy", "target"}, rows)

	// S4b
	rows = nil
	for _, c := range r.redlock {
		if !r.has("S4b", c.Name) {
			continue
		}
		x := r.rel("S4b", c.Name, floor, "ops")
		var t []string
		if c.Floor {
			t = append(t, "floor")
		}
		if c.DlockTransport == "rueidis" {
			ok := x >= 1.5
			t = append(t, "≥ 1.5× raw "+passFail(ok))
			checks = append(checks, check{"S4b " + c.Name + " cycles/s ≥ 1.5× raw-parallel", r.withQuiet("S4b", c.Name, floor), ok})
			var vs []string
			worst := math.Inf(1)
			for _, p := range r.s4Peers("S4b") {
				v := r.rel("S4b", c.Name, p, "ops")
				worst = math.Min(worst, v)
				vs = append(vs, p+" "+r.withQuiet("S4b", c.Name, p))
			}
			if len(vs) > 0 {
				ok := worst > 1
				t = append(t, "ahead of every peer "+passFail(ok))
				checks = append(checks, check{"S4b " + c.Name + " cycles/s ahead of every peer (this ÷ peer)", strings.Join(vs, ", "), ok})
			}
		}
		rows = append(rows, append([]string{c.Name, fmtInt(r.med("S4b", c.Name, "ops")), fmtX(x)},
			append(r.cpuCols("S4b", c.Name), strings.Join(t, "<br>"))...))
	}
	fmt.Fprintf(b, "#### S4b — %d goroutines, one shared client (per node), distinct keys\n\n", r.cfg.RedlockGoroutines)
	table(b, []string{"contender", "cycles/s", "× raw-parallel", "process CPU/cycle", "redis CPU, commands/cycle (5 nodes, incl. Lua)",
		"CPU/cycle total → cores busy", "target"}, rows)

	r.s4f(b, floor)
	return checks
}

// cpuCols are the CPU columns of S4a and S4b: process, nodes, and their
// sum with the cores it keeps busy at the measured rate.
func (r *Results) cpuCols(sc, name string) []string {
	cl, rd := r.med(sc, name, "cpu_client"), r.med(sc, name, "cpu_redis")
	var busy []float64
	for _, m := range r.runs[sc][name] {
		if m != nil {
			busy = append(busy, (m["cpu_client"]+m["cpu_redis"])*m["ops"]/1e9)
		}
	}
	return []string{fmtDur(cl), fmtDur(rd) + ", " + fmtF(r.med(sc, name, "redis_cmds_all"), 1) + " cmds",
		fmtDur(cl+rd) + " → " + fmtF(median(busy), 2) + " (other processes: " + fmtF(r.med(sc, name, "cpu_other"), 2) + ")"}
}

// s4f renders the fencing-cost breakdown: one column per dlock transport.
func (r *Results) s4f(b *strings.Builder, floor string) {
	var names []string
	for _, c := range r.redlock {
		if c.DlockTransport != "" && r.has("S4f", c.Name) {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		return
	}
	type row struct {
		label string
		f     func(name string) string
	}
	dur := func(k string) func(string) string {
		return func(n string) string { return fmtDur(r.med("S4f", n, k)) }
	}
	per := func(k string) func(string) string {
		return func(n string) string { return fmtF(r.med("S4f", n, k), 2) }
	}
	pct := func(k string) func(string) string {
		return func(n string) string { return fmtF(100*r.med("S4f", n, k), 1) + "%" }
	}
	rows := []row{
		{"cycles/s with the timing Conn (÷ same contender's S4a, same repetition: instrumentation overhead)", func(n string) string {
			return fmtInt(r.med("S4f", n, "ops")) + " (" + fmtX(r.relAcross("S4f", n, "ops", "S4a", n, "ops")) + ")"
		}},
		{"mean cycle = Lock + Release", dur("cycle")},
		{"mean Lock()", dur("lock")},
		{"  · Lock called → first quorum_acquire Eval enters a Conn", dur("pre_acq")},
		{"  · first quorum_acquire Eval enters → quorum-th (3rd) acquire Eval returns", dur("acq_quorum")},
		{"  · quorum-th acquire reply → Lock returns (fence phase + grant bookkeeping)", dur("after_quorum")},
		{"      of which: first quorum_fence Eval enters → last returns (fence span)", dur("fence_span")},
		{"      of which: last quorum_fence Eval returns → Lock returns", dur("fence_to_lock")},
		{"mean Release()", dur("release")},
		{"  · first release Eval enters → last returns", dur("release_span")},
		{"Evals per cycle: quorum_acquire / quorum_fence / release", func(n string) string {
			return per("evals_acq")(n) + " / " + per("evals_fence")(n) + " / " + per("evals_rel")(n)
		}},
		{"mean time inside one Eval: quorum_acquire / quorum_fence / release", func(n string) string {
			return dur("eval_acq")(n) + " / " + dur("eval_fence")(n) + " / " + dur("eval_rel")(n)
		}},
		{"**fence span ÷ cycle** (wall time per acquisition spent in quorum_fence)", pct("fence_frac")},
		{"(quorum-th acquire reply → Lock returns) ÷ cycle (upper bound of the fence's share)", pct("after_quorum_frac")},
		{"estimated cycles/s without the fence write: fence span removed … whole after-quorum part removed", func(n string) string {
			return fmtInt(r.med("S4f", n, "ops_nofence")) + " … " + fmtInt(r.med("S4f", n, "ops_nofence_max"))
		}},
		{"same, ÷ raw-parallel S4a (same repetition) — compare with the 1.2× target", func(n string) string {
			return fmtX(r.relAcross("S4f", n, "ops_nofence", "S4a", floor, "ops")) + " … " +
				fmtX(r.relAcross("S4f", n, "ops_nofence_max", "S4a", floor, "ops"))
		}},
	}
	var out [][]string
	for _, rw := range rows {
		line := []string{strings.ReplaceAll(rw.label, "  ", "&nbsp;&nbsp;")}
		for _, n := range names {
			line = append(line, rw.f(n))
		}
		out = append(out, line)
	}
	b.WriteString("#### S4f — fencing cost: S4a's loop for dlock with a timing wrapper on every node's Conn\n\n")
	b.WriteString("Measured, not a switch in the library: each node's `redislock.Conn` is wrapped, and every `Eval` records " +
		"its script (`call.Script.Name`) and when it entered and left the Conn. Evals are assigned to the cycle in which " +
		"they started. Times are means per cycle (they add up; medians would not); each value is then the median over " +
		"repetitions. The fence span starts after the fan-out goroutines have started, so it is a lower bound of what the " +
		"fence round trip costs the caller; the after-quorum part adds the grant's bookkeeping (lease registry, renewal " +
		"scheduling), which would remain without fencing, so it is an upper bound.\n\n")
	table(b, append([]string{"measure"}, names...), out)
}

// s4Notes describes the S4 contenders and definitions.
func (r *Results) s4Notes(b *strings.Builder) {
	if r.runs["S4a"] == nil {
		return
	}
	b.WriteString("### S4: how each contender was configured\n\n")
	for _, c := range r.redlock {
		fmt.Fprintf(b, "- **%s**: %s\n", c.Name, c.Config)
	}
	fmt.Fprintf(b, "- **rueidislock** (not run): %s. Its `KeyMajority` counts keys (`<prefix>:<i>:<name>`, i < 2·KeyMajority−1) "+
		"of **one** rueidis client — spread over the slots of one Redis Cluster, or all on one standalone server — and "+
		"`LockerOption` takes a single `ClientOption`, so it has no way to address independent masters. It is not a "+
		"Redlock implementation over independent nodes and is skipped.\n", r.rueidislockProbe)
	fmt.Fprintf(b, `
Lock TTL 10s for raw-parallel and dlock; redsync keeps its default expiry (8s).

### S4: definitions

- Before each of S4a and S4b the floor runs once untimed and is discarded. Within each repetition S4a runs for every
  contender, then S4b, then S4f, each round-robin in an order rotated between repetitions.
- Before every run each of the %d nodes gets FLUSHALL and then `+"`HSET dlock:epoch created <now − 1h, ms> boot <the same> seen <LASTSAVE>`"+`:
  dlock's restart detection stays on (the default) and sees nodes that have been up for an hour, so every node votes
  at once and the measured acquire is the real one (LASTSAVE and epoch read, uptime check). The other contenders ignore the key.
- **S4a**: one goroutine, one client (one Redis client per node); each cycle locks a fresh key and releases it;
  latency is one whole cycle; %s warm-up first.
- **S4b**: %d goroutines share one client; goroutine g locks keys s4b:g:0, s4b:g:1, …; after a %s concurrent warm-up.
- *process CPU/cycle* = getrusage(RUSAGE_SELF) user+sys delta over the timed part ÷ cycles (every goroutine of this
  process, background work included); *redis CPU/cycle* = the 5 nodes' run time delta (/proc/<pid>/task/*/schedstat, in ns)
  ÷ cycles; *cores busy* = their sum × cycles/s; *other processes* = the machine's non-idle CPU (/proc/stat) minus
  this process and the nodes, ÷ wall time, in cores: other work on the machine during the run (noise). Near the machine's core count (%d) a run is bound by CPU, not by
  round-trip latency: its rate is then set by the CPU each cycle costs, client and servers together.
- **S4f**: see its table. The ratios to raw-parallel in the targets use S4a's numbers (no wrapper).
`, RedlockNodes, r.cfg.Warmup, r.cfg.RedlockGoroutines, r.cfg.Warmup, runtime.NumCPU())
}
