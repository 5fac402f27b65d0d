package lockbench

import (
	"fmt"
	"runtime"
	"strings"
)

// ranMy reports whether M1 or M2 ran.
func (r *Results) ranMy() bool { return r.runs["M1"] != nil || r.runs["M2"] != nil }

func (r *Results) myHeader(b *strings.Builder) {
	if !r.ranMy() {
		return
	}
	fmt.Fprintf(b, "- M1, M2: MariaDB %s and PostgreSQL %s on 127.0.0.1, started by the benchmark through internal/testenv (Debian "+
		"packages; MariaDB with `innodb_flush_log_at_trx_commit=2`, doublewrite off; PostgreSQL with `fsync=off`), the tables "+
		"migrated once; they share this machine's %d cores with the client and the redis-server\n",
		r.mariadb, r.postgres, runtime.NumCPU())
}

// mTraffic returns what an M contender sent per cycle or acquisition.
func (r *Results) mTraffic(sc string, c Contender) string {
	switch {
	case c.OpenMySQL != nil:
		return fmtF(r.med(sc, c.Name, "my_stmts"), 2) + " statements"
	case c.OpenPG != nil:
		return fmtF(r.med(sc, c.Name, "pg_stmts"), 2) + " statements"
	}
	return fmtF(r.med(sc, c.Name, "redis_cmds_client"), 2) + " Redis cmds"
}

// m1: uncontended lock + release on one fixed name.
func (r *Results) m1(b *strings.Builder) {
	var rows [][]string
	for _, c := range r.my {
		if !r.has("M1", c.Name) {
			continue
		}
		m := func(k string) float64 { return r.med("M1", c.Name, k) }
		rows = append(rows, []string{c.Name, fmtInt(m("ops")), r.px("M1", c.Name, "ops"), fmtDur(m("p50")), r.px("M1", c.Name, "p50"),
			fmtDur(m("p99")), r.px("M1", c.Name, "p99"), r.mTraffic("M1", c)})
	}
	b.WriteString("### M1 — MySQL (MariaDB) beside PostgreSQL and Redis: 1 goroutine, one client, uncontended lock + release on one fixed name\n\n")
	table(b, []string{"contender", "cycles/s", "× dlock-redis", "p50 cycle", "× dlock-redis", "p99 cycle", "× dlock-redis",
		"sent per cycle"}, rows)
}

// m2: hand-over between independent clients.
func (r *Results) m2(b *strings.Builder) {
	var rows [][]string
	for _, c := range r.my {
		if !r.has("M2", c.Name) {
			continue
		}
		m := func(k string) float64 { return r.med("M2", c.Name, k) }
		rows = append(rows, []string{c.Name, fmtDur(m("handoff_call")), r.px("M2", c.Name, "handoff_call"),
			fmtDur(m("handoff_call_p99")), r.px("M2", c.Name, "handoff_call_p99"),
			fmtDur(r.maxOver("M2", c.Name, "handoff_call_max")), fmtInt(m("acq_s")), r.px("M2", c.Name, "acq_s"),
			fmtF(100*m("handoff_share"), 0) + "%", fmtF(m("share_min"), 2) + "–" + fmtF(m("share_max"), 2),
			r.mTraffic("M2", c), fmtInt(m("overlaps")), fmtInt(m("failures"))})
	}
	fmt.Fprintf(b, "### M2 — MySQL (MariaDB) hand-over beside PostgreSQL and Redis: %d independent clients on one lock (blocking Lock, hold %s busy work)\n\n",
		r.cfg.Clients, r.cfg.Hold)
	table(b, []string{"contender", "handoff p50 (from Release call)", "× dlock-redis", "handoff p99", "× dlock-redis",
		"longest handoff (all reps)", "acq/s", "× dlock-redis", "hand-overs", "share min–max (× fair)", "sent per acquisition",
		"overlaps", "failed Lock/Release"}, rows)
}

func (r *Results) myNotes(b *strings.Builder) {
	if !r.ranMy() {
		return
	}
	b.WriteString("### M1, M2: contenders and definitions\n\n")
	for _, c := range r.my {
		if r.runs["M1"][c.Name] != nil || r.runs["M2"][c.Name] != nil {
			fmt.Fprintf(b, "- **%s**: %s\n", c.Name, c.Config)
		}
	}
	b.WriteString(`
- M1 and M2 run these five contenders, whatever -contenders says, in one run against the same MariaDB,
  PostgreSQL and redis-server, as P1 and P2 do (warm-up, round-robin repetitions, medians, ratios to
  dlock-redis). M1 is P1's loop and M2 is P2's.
- *sent per cycle/acquisition*: for the MySQL contenders, the server's Questions counter (every statement a
  client sent; nothing else talks to the server meanwhile), for the PostgreSQL ones the pgx tracer's count,
  for dlock-redis INFO's client-sent commands, ÷ cycles or acquisitions. A mysqllock waiter polls (2–64ms
  backoff), so M2's statements include the polls of the waiting clients.

`)
}
