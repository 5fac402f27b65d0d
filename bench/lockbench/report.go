package lockbench

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// A check is one target of the issue, judged on this run's numbers.
type check struct {
	what, got string
	pass      bool
}

// Markdown renders the results: environment, one table per scenario with
// ratios to the floor and PASS/FAIL next to each target, a summary of the
// targets, and notes.
func (r *Results) Markdown() string {
	var b strings.Builder
	var checks []check
	r.header(&b)
	for _, sc := range AllScenarios {
		if r.runs[sc] == nil && (sc != "S4" || r.runs["S4a"] == nil) {
			continue
		}
		switch sc {
		case "S1":
			checks = append(checks, r.s1(&b)...)
		case "S2":
			checks = append(checks, r.s2(&b)...)
		case "S3":
			checks = append(checks, r.s3(&b)...)
		case "R1":
			checks = append(checks, r.r1(&b)...)
		case "S4":
			checks = append(checks, r.s4(&b)...)
		case "S5":
			checks = append(checks, r.s5(&b)...)
		case "S6":
			checks = append(checks, r.s6(&b)...)
		case "R2":
			checks = append(checks, r.r2(&b)...)
		case "Z1":
			r.z1(&b)
		case "Z2":
			r.z2(&b)
		case "P1":
			r.p1(&b)
		case "P2":
			r.p2(&b)
		case "M1":
			r.m1(&b)
		case "M2":
			r.m2(&b)
		}
	}
	if len(checks) > 0 {
		b.WriteString("### Targets\n\n")
		var rows [][]string
		for _, c := range checks {
			rows = append(rows, []string{c.what, c.got, passFail(c.pass)})
		}
		table(&b, []string{"target", "this run", "result"}, rows)
	}
	r.errors(&b)
	r.notes(&b)
	r.issue4Notes(&b)
	r.zkNotes(&b)
	r.pgNotes(&b)
	r.myNotes(&b)
	return b.String()
}

func (r *Results) header(b *strings.Builder) {
	mode := "full"
	if r.cfg.Short {
		mode = "short"
	}
	fmt.Fprintf(b, "### Run\n\n")
	fmt.Fprintf(b, "- Date: %s (wall time %s)\n", r.start.UTC().Format("2006-01-02 15:04 UTC"), r.elapsed.Round(time.Second))
	fmt.Fprintf(b, "- Machine: %d cores (GOMAXPROCS %d), %s/%s, %s — shared and noisy; compare ratios, not absolute numbers\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, cpuModel())
	fmt.Fprintf(b, "- Go %s; redis-server %s (started by the benchmark on 127.0.0.1, no persistence, FLUSHALL before every run)\n",
		strings.TrimPrefix(runtime.Version(), "go"), r.redis)
	if r.runs["S4a"] != nil {
		fmt.Fprintf(b, "- S4: %d independent redis-server processes (127.0.0.1, each its own port, no persistence), started by the "+
			"benchmark; before every run FLUSHALL on each, then the dlock epoch pre-aged by 1h (see S4 notes). All %d share this "+
			"machine's %d cores with the client\n", RedlockNodes, RedlockNodes, runtime.NumCPU())
	}
	r.zkHeader(b)
	r.pgHeader(b)
	r.myHeader(b)
	fmt.Fprintf(b, "- Library: %s\n", r.library)
	durations := r.cfg.Duration.String()
	if r.runs["S4a"] != nil && r.cfg.s4Duration() != r.cfg.Duration {
		durations += " (S4: " + r.cfg.s4Duration().String() + ")"
	}
	fmt.Fprintf(b, "- Mode %s: %s per scenario per contender per repetition, %d repetitions round-robin over contenders "+
		"(order rotated each repetition); every number is the median over repetitions, every ratio the median of per-repetition ratios\n",
		mode, durations, r.cfg.Reps)
	fmt.Fprintf(b, "- Command: `%s`\n\n", strings.Join(append([]string{"lockbench"}, os.Args[1:]...), " "))
}

func (r *Results) s1(b *strings.Builder) []check {
	floor := r.floor()
	var rows [][]string
	var checks []check
	for _, c := range r.contenders {
		if !r.has("S1", c.Name) {
			continue
		}
		x := r.rel("S1", c.Name, floor, "ops")
		t := "floor"
		if want := map[string]float64{"goredis": 1.0, "rueidis": 0.95}[c.DlockTransport]; want > 0 {
			ok := x >= want
			t = fmt.Sprintf("≥ %.2f× %s", want, passFail(ok))
			checks = append(checks, check{fmt.Sprintf("S1 %s ops/s ≥ %.2f× raw", c.Name, want), fmtX(x), ok})
			checks = append(checks, r.cmdsCheck("S1", c.Name))
		} else if !c.Floor {
			t = ""
		}
		rows = append(rows, []string{c.Name, fmtInt(r.med("S1", c.Name, "ops")), fmtX(x),
			fmtDur(r.med("S1", c.Name, "p50")), fmtDur(r.med("S1", c.Name, "p99")),
			fmtF(r.med("S1", c.Name, "redis_cmds_all"), 2), fmtDur(r.med("S1", c.Name, "srv_cpu")), t})
	}
	b.WriteString("### S1 — 1 goroutine, uncontended, fresh key per cycle (lock + release)\n\n")
	table(b, []string{"contender", "cycles/s", "× raw", "p50 cycle", "p99 cycle", "server cmds/cycle (incl. Lua)", "server CPU/cycle", "target"}, rows)
	return checks
}

func (r *Results) s2(b *strings.Builder) []check {
	floor := r.floor()
	var rows [][]string
	var checks []check
	for _, c := range r.contenders {
		if !r.has("S2", c.Name) {
			continue
		}
		x := r.rel("S2", c.Name, floor, "ops")
		t := ""
		if c.Floor {
			t = "floor"
		}
		if want := map[string]float64{"goredis": 0.95, "rueidis": 1.5}[c.DlockTransport]; want > 0 {
			ok := x >= want
			t = fmt.Sprintf("≥ %.2f× %s", want, passFail(ok))
			checks = append(checks, check{fmt.Sprintf("S2 %s ops/s ≥ %.2f× raw", c.Name, want), fmtX(x), ok})
			checks = append(checks, r.cmdsCheck("S2", c.Name))
		}
		rows = append(rows, []string{c.Name, fmtInt(r.med("S2", c.Name, "ops")), fmtX(x),
			fmtF(r.med("S2", c.Name, "redis_cmds_all"), 2), fmtDur(r.med("S2", c.Name, "srv_cpu")), t})
	}
	fmt.Fprintf(b, "### S2 — %d goroutines, one shared client, distinct keys\n\n", r.cfg.Goroutines)
	table(b, []string{"contender", "cycles/s", "× raw", "server cmds/cycle (incl. Lua)", "server CPU/cycle", "target"}, rows)
	return checks
}

// cmdsCheck is issue 18's target on an uncontended cycle's server work:
// at most 6 commands, those inside Lua included.
func (r *Results) cmdsCheck(sc, name string) check {
	n := r.med(sc, name, "redis_cmds_all")
	return check{fmt.Sprintf("%s %s ≤ 6 server commands/cycle (incl. Lua)", sc, name), fmtF(n, 2), n <= 6.05}
}

func (r *Results) s3(b *strings.Builder) []check {
	floor := r.floor()
	var rows [][]string
	var checks []check
	for _, c := range r.contenders {
		if !r.has("S3", c.Name) {
			continue
		}
		p50, rawP50 := r.med("S3", c.Name, "handoff_p50"), r.med("S3", floor, "handoff_p50")
		x := math.NaN() // ratio of medians; undefined when the floor's p50 is not positive
		if rawP50 > 0 {
			x = p50 / rawP50
		}
		call, xCall := r.med("S3", c.Name, "handoff_call"), r.rel("S3", c.Name, floor, "handoff_call")
		cmds := r.med("S3", c.Name, "cmds_all")
		lo, hi := r.med("S3", c.Name, "share_min"), r.med("S3", c.Name, "share_max")
		var t []string
		if c.Floor {
			t = append(t, "floor")
		}
		if c.DlockTransport != "" {
			okRaw := p50 <= 1.5*rawP50 // read literally, also when rawP50 <= 0
			okCall := xCall <= 1.5
			vsRedsync := r.rel("S3", "redsync", c.Name, "handoff_p50")
			okRedsync := vsRedsync >= 50
			okCmds := cmds <= 10
			okFair := lo >= 0.5 && hi <= 1.5
			t = append(t, "p50 ≤ 1.5× raw "+passFail(okRaw), "from call ≤ 1.5× raw "+passFail(okCall),
				fmt.Sprintf("redsync ÷ this = %s (≥ 50×) %s", fmtX(vsRedsync), passFail(okRedsync)),
				"cmds ≤ 10 "+passFail(okCmds), "shares in 0.5–1.5× "+passFail(okFair))
			checks = append(checks,
				check{"S3 " + c.Name + " handoff p50 ≤ 1.5× raw spin's (from Release returning)", fmt.Sprintf("%s vs 1.5 × %s", fmtDur(p50), fmtDur(rawP50)), okRaw},
				check{"S3 " + c.Name + " same, clock started at the Release call (robust variant)", fmt.Sprintf("%s (%s vs %s)", fmtX(xCall), fmtDur(call), fmtDur(r.med("S3", floor, "handoff_call"))), okCall},
				check{"S3 " + c.Name + " handoff p50 ≥ 50× lower than redsync default", fmt.Sprintf("%s (%s vs %s)", fmtX(vsRedsync), fmtDur(p50), fmtDur(r.med("S3", "redsync", "handoff_p50"))), okRedsync},
				check{"S3 " + c.Name + " ≤ 10 server commands/acquisition (total_commands_processed, incl. Lua-internal)", fmtF(cmds, 1), okCmds},
				check{"S3 " + c.Name + " client-sent commands/acquisition ≤ 10 (commandstats minus Lua-internal; informative)", fmtF(r.med("S3", c.Name, "cmds_client"), 1), r.med("S3", c.Name, "cmds_client") <= 10},
				check{"S3 " + c.Name + " every client's share within 0.5–1.5× fair", fmt.Sprintf("%s–%s", fmtF(lo, 2), fmtF(hi, 2)), okFair})
		}
		rows = append(rows, []string{c.Name, fmtDur(p50), fmtX(x), fmtDur(r.med("S3", c.Name, "handoff_p99")),
			fmtDur(call), fmtX(xCall), fmtF(100*r.med("S3", c.Name, "handoff_share"), 0) + "%",
			fmtInt(r.med("S3", c.Name, "acq_s")), fmtF(cmds, 1), fmtF(r.med("S3", c.Name, "cmds_client"), 1),
			fmtF(lo, 2) + "–" + fmtF(hi, 2), fmtInt(r.med("S3", c.Name, "overlaps")), fmtInt(r.med("S3", c.Name, "failures")),
			fmtDur(r.med("S3", c.Name, "srv_cpu_acq")),
			fmtDur(r.med("S3", c.Name, "wait_p99")) + " (" + fmtX(r.med("S3", c.Name, "wait_p99")/r.med("S3", c.Name, "wait_fair")) + ")",
			r.waitCol(c),
			strings.Join(t, "<br>")})
	}
	fmt.Fprintf(b, "### S3 — %d independent clients contending for one key (blocking Lock, hold %s busy work)\n\n", r.cfg.Clients, r.cfg.Hold)
	table(b, []string{"contender", "handoff p50", "× raw", "handoff p99", "p50 from Release call", "× raw", "hand-overs",
		"acq/s", "server cmds/acq (all)", "client-sent cmds/acq", "share min–max (× fair)", "overlaps", "failed Lock/Release",
		"server CPU/acq", "wait p99 (× fair)", "waiting attempts / notices per acq, fallback polls", "targets"}, rows)
	return checks
}

// waitCol is S3's count of dlock's waiting attempts, release notices and
// fallback polls (see pollConn); empty for other contenders.
func (r *Results) waitCol(c Contender) string {
	if c.DlockTransport == "" {
		return ""
	}
	return fmtF(r.med("S3", c.Name, "waited_acq"), 2) + " / " + fmtF(r.med("S3", c.Name, "notices_acq"), 2) + ", " +
		fmtInt(r.med("S3", c.Name, "polls"))
}

func (r *Results) r1(b *strings.Builder) []check {
	var rows [][]string
	var checks []check
	for _, c := range r.contenders {
		if c.DlockTransport == "" || !r.has("R1", c.Name) {
			continue
		}
		n := r.med("R1", c.Name, "leases")
		rt := r.med("R1", c.Name, "rt_round")
		lost := r.med("R1", c.Name, "lost")
		batches := math.Ceil(n / 4096)
		ok := rt <= 2*batches && lost == 0
		checks = append(checks, check{fmt.Sprintf("R1 %s one round trip per batch, not per lease (≤ %.0f round trips per round for %s leases, none lost)", c.Name, 2*batches, fmtInt(n)),
			fmt.Sprintf("%s round trips/round, %s leases/round trip, %s lost", fmtF(rt, 2), fmtInt(r.med("R1", c.Name, "leases_rt")), fmtInt(lost)), ok})
		rows = append(rows, []string{c.Name, fmtInt(n), fmtF(rt, 2), fmtInt(r.med("R1", c.Name, "leases_rt")),
			fmtInt(r.med("R1", c.Name, "max_batch")), fmtInt(r.med("R1", c.Name, "renewed_round")),
			fmtDur(r.med("R1", c.Name, "cpu_round")), fmtDur(r.med("R1", c.Name, "srv_cpu_round")),
			fmtBytes(r.med("R1", c.Name, "alloc_round")), fmtInt(r.med("R1", c.Name, "heap_lease")) + " B",
			fmtF(r.med("R1", c.Name, "min_valid")/1e9, 1) + "s", fmtInt(lost), passFail(ok)})
	}
	fmt.Fprintf(b, "### R1 — one client renewing many leases (TTL %s, renewal every %s, %d periods measured, at most 3 repetitions)\n\n", r.cfg.R1TTL, r.cfg.R1TTL/3, r.cfg.Rounds)
	table(b, []string{"contender", "leases", "round trips/round", "leases/round trip", "largest batch", "renewals/round",
		"process CPU/round", "redis CPU/round", "heap alloc/round", "heap in use/lease", "min validity left", "leases lost", "target"}, rows)
	return checks
}

func (r *Results) errors(b *strings.Builder) {
	var lines []string
	for _, sc := range append(slices.Clone(AllScenarios), s4Parts...) {
		seen := map[string]bool{}
		for _, c := range slices.Concat(r.contenders, r.redlock, r.issue4, r.zk) {
			if seen[c.Name] {
				continue
			}
			seen[c.Name] = true
			for rep, e := range r.errs[sc][c.Name] {
				if e != "" {
					lines = append(lines, fmt.Sprintf("- %s %s rep %d: %s", sc, c.Name, rep+1, e))
				}
			}
			for rep, m := range r.runs[sc][c.Name] {
				if n := m["timeouts"]; n > 0 {
					lines = append(lines, fmt.Sprintf("- %s %s rep %d: %.0f Lock or Release calls were still running at their %s deadline "+
						"(counted here, left out of the figures; the run went on)", sc, c.Name, rep+1, n, CallTimeout))
				}
			}
		}
	}
	if r.abandoned > 0 {
		lines = append(lines, fmt.Sprintf("- %d runs were abandoned at their bound (a call ignored its deadline)", r.abandoned))
	}
	if len(lines) > 0 {
		b.WriteString("### Errors and timeouts\n\n" + strings.Join(lines, "\n") + "\n\n")
	}
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
