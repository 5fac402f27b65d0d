package lockbench

import (
	"fmt"
	"runtime"
	"strings"
)

// ranPG reports whether P1 or P2 ran.
func (r *Results) ranPG() bool { return r.runs["P1"] != nil || r.runs["P2"] != nil }

func (r *Results) pgHeader(b *strings.Builder) {
	if !r.ranPG() {
		return
	}
	fmt.Fprintf(b, "- P1, P2: PostgreSQL %s on 127.0.0.1, started by the benchmark through internal/testenv (Debian package; "+
		"`fsync=off`, `full_page_writes=off`, otherwise defaults), pglock's objects migrated once; nothing is deleted between runs "+
		"(each run has its own lock names). It shares this machine's %d cores with the client and the redis-server\n",
		r.postgres, runtime.NumCPU())
}

// px returns name's per-repetition ratio of metric k to dlock-redis
// ("base" on dlock-redis's own row).
func (r *Results) px(sc, name, k string) string {
	if name == PGRedisName {
		return "base"
	}
	return fmtX(r.rel(sc, name, PGRedisName, k))
}

// traffic returns what a PostgreSQL or Redis contender sent per cycle or
// acquisition.
func (r *Results) traffic(sc string, c Contender) string {
	if c.OpenPG != nil {
		return fmtF(r.med(sc, c.Name, "pg_stmts"), 2) + " statements"
	}
	return fmtF(r.med(sc, c.Name, "redis_cmds_client"), 2) + " Redis cmds"
}

// p1: uncontended lock + release on one fixed name.
func (r *Results) p1(b *strings.Builder) {
	var rows [][]string
	for _, c := range r.pg {
		if !r.has("P1", c.Name) {
			continue
		}
		m := func(k string) float64 { return r.med("P1", c.Name, k) }
		rows = append(rows, []string{c.Name, fmtInt(m("ops")), r.px("P1", c.Name, "ops"), fmtDur(m("p50")), r.px("P1", c.Name, "p50"),
			fmtDur(m("p99")), r.px("P1", c.Name, "p99"), r.traffic("P1", c)})
	}
	b.WriteString("### P1 — PostgreSQL: 1 goroutine, one client, uncontended lock + release on one fixed name\n\n")
	table(b, []string{"contender", "cycles/s", "× dlock-redis", "p50 cycle", "× dlock-redis", "p99 cycle", "× dlock-redis",
		"sent per cycle"}, rows)
}

// p2: hand-over between independent clients.
func (r *Results) p2(b *strings.Builder) {
	var rows [][]string
	for _, c := range r.pg {
		if !r.has("P2", c.Name) {
			continue
		}
		m := func(k string) float64 { return r.med("P2", c.Name, k) }
		rows = append(rows, []string{c.Name, fmtDur(m("handoff_call")), r.px("P2", c.Name, "handoff_call"),
			fmtDur(m("handoff_call_p99")), r.px("P2", c.Name, "handoff_call_p99"),
			fmtDur(r.maxOver("P2", c.Name, "handoff_call_max")), fmtInt(m("acq_s")), r.px("P2", c.Name, "acq_s"),
			fmtF(100*m("handoff_share"), 0) + "%", fmtF(m("share_min"), 2) + "–" + fmtF(m("share_max"), 2),
			r.traffic("P2", c), fmtInt(m("overlaps")), fmtInt(m("failures"))})
	}
	fmt.Fprintf(b, "### P2 — PostgreSQL hand-over: %d independent clients (each its own pool or Redis client) on one lock (blocking Lock, hold %s busy work)\n\n",
		r.cfg.Clients, r.cfg.Hold)
	table(b, []string{"contender", "handoff p50 (from Release call)", "× dlock-redis", "handoff p99", "× dlock-redis",
		"longest handoff (all reps)", "acq/s", "× dlock-redis", "hand-overs", "share min–max (× fair)", "sent per acquisition",
		"overlaps", "failed Lock/Release"}, rows)
}

func (r *Results) pgNotes(b *strings.Builder) {
	if !r.ranPG() {
		return
	}
	b.WriteString("### P1, P2: contenders and definitions\n\n")
	for _, c := range r.pg {
		if r.runs["P1"][c.Name] != nil || r.runs["P2"][c.Name] != nil {
			fmt.Fprintf(b, "- **%s**: %s\n", c.Name, c.Config)
		}
	}
	fmt.Fprintf(b, `
- P1 and P2 always run these three contenders, whatever -contenders says, in one run against the same
  PostgreSQL server and redis-server. Each run opens its own clients and uses its own lock names; the Redis
  server is flushed before every run. Before each scenario the first contender runs once untimed and is
  discarded; then every repetition runs each contender once, round-robin, in an order rotated between
  repetitions. Numbers are medians over repetitions; every "× dlock-redis" is the median of the
  per-repetition ratios (below 1 means lower: faster for latencies, slower for cycles/s and acq/s).
- *sent per cycle/acquisition*: for the PostgreSQL contenders, the statements their pools sent (a pgx query
  tracer counting every Query, QueryRow and Exec: acquire and release statements, LISTEN, session-mode
  confirmations) during the measured part, ÷ cycles or acquisitions; for dlock-redis, S3's client-sent
  command count from INFO.
- **P1**: one client, one goroutine: lock + release of one fixed name, %s of untimed cycles first, then
  cycles for the run's duration. *p50/p99 cycle* = one whole lock + release. A lease-mode cycle is two
  statements (the acquire upsert, the release update); a session-mode cycle takes a pooled connection,
  runs the try-lock statement and the unlock statement on it, and gives it back.
- **P2**: %d clients, each its own pool and pglock.Client (or Redis client and lock client), S3's loop with
  Z2's drain: blocking Lock on one name, %s busy work, Release, Lock again at once; clients stop asking at the
  end of the run and a client still waiting takes the lock once more. *handoff* = for every release, the time
  from that **Release call** to the next acquisition by a different client (p50, p99); *longest handoff* is
  the maximum over all repetitions; *acq/s*, *hand-overs* (share of consecutive acquisitions that changed
  client), *share* and *overlaps* (acquisitions granted before the previous holder called Release; must be 0)
  count acquisitions before the end; *sent per acquisition* covers the whole loop, drain included.

`, r.cfg.Warmup, r.cfg.Clients, r.cfg.Hold)
}
