package lockbench

import (
	"fmt"
	"math"
	"runtime"
	"strings"
)

// ranZK reports whether Z1 or Z2 ran.
func (r *Results) ranZK() bool { return r.runs["Z1"] != nil || r.runs["Z2"] != nil }

func (r *Results) zkHeader(b *strings.Builder) {
	if !r.ranZK() {
		return
	}
	fmt.Fprintf(b, "- Z1, Z2: ZooKeeper %s ensemble of %d servers on 127.0.0.1, started by the benchmark through internal/testenv "+
		"(Debian package; tickTime 200ms, `zookeeper.forceSync=no`, JVM `-Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1`, "+
		"empty container nodes reaped every 1s); nothing is deleted between runs (each run has its own paths). All %d share this "+
		"machine's %d cores with the client and the redis-server\n", r.zookeeper, ZKServers, ZKServers, runtime.NumCPU())
}

// zx returns name's per-repetition ratio of metric k to dlock-redis and
// to zk.Lock ("base" on the reference's own row).
func (r *Results) zx(sc, name, k string) (vsRedis, vsPeer string) {
	one := func(ref string) string {
		if name == ref {
			return "base"
		}
		return fmtX(r.rel(sc, name, ref, k))
	}
	return one(ZKRedisName), one(ZKPeerName)
}

// z1: uncontended lock + release on one fixed path or key.
func (r *Results) z1(b *strings.Builder) {
	var rows [][]string
	for _, c := range r.zk {
		if !r.has("Z1", c.Name) {
			continue
		}
		m := func(k string) float64 { return r.med("Z1", c.Name, k) }
		opsR, opsP := r.zx("Z1", c.Name, "ops")
		p50R, p50P := r.zx("Z1", c.Name, "p50")
		p99R, p99P := r.zx("Z1", c.Name, "p99")
		req, reads, writes := "n/a", "n/a", "n/a"
		if c.OpenNodes != nil {
			req = fmtF(m("zk_req"), 2)
			reads = fmt.Sprintf("%s (%s + %s + %s)", fmtF(m("zk_reads"), 2), fmtF(m("zk_children"), 2),
				fmtF(m("zk_getdata"), 2), fmtF(m("zk_other_reads"), 2))
			writes = fmtF(m("zk_writes"), 2)
		} else {
			req = fmtF(m("redis_cmds_client"), 2) + " Redis cmds"
		}
		rows = append(rows, []string{c.Name, fmtInt(m("ops")), opsR, opsP, fmtDur(m("p50")), p50R, p50P,
			fmtDur(m("p99")), p99R, p99P, req, reads, writes})
	}
	b.WriteString("### Z1 — ZooKeeper: 1 goroutine, one client, uncontended lock + release on one fixed path\n\n")
	table(b, []string{"contender", "cycles/s", "× dlock-redis", "× zk.Lock", "p50 cycle", "× dlock-redis", "× zk.Lock",
		"p99 cycle", "× dlock-redis", "× zk.Lock", "server requests/cycle", "ZK reads/cycle (getChildren + getData + exists/ping)",
		"ZK writes/cycle"}, rows)
}

// z2: hand-over between independent clients.
func (r *Results) z2(b *strings.Builder) {
	var rows, traffic [][]string
	for _, c := range r.zk {
		if !r.has("Z2", c.Name) {
			continue
		}
		m := func(k string) float64 { return r.med("Z2", c.Name, k) }
		p50R, p50P := r.zx("Z2", c.Name, "handoff_call")
		p99R, p99P := r.zx("Z2", c.Name, "handoff_call_p99")
		acqR, acqP := r.zx("Z2", c.Name, "acq_s")
		rows = append(rows, []string{c.Name, fmtDur(m("handoff_call")), p50R, p50P, fmtDur(m("handoff_call_p99")), p99R, p99P,
			fmtDur(r.maxOver("Z2", c.Name, "handoff_call_max")), fmtDur(r.maxOver("Z2", c.Name, "first_acq")),
			fmtInt(m("acq_s")), acqR, acqP, fmtDur(m("handoff_p50")), fmtF(100*m("handoff_share"), 0) + "%",
			fmtF(m("share_min"), 2) + "–" + fmtF(m("share_max"), 2), fmtInt(m("overlaps")), fmtInt(m("failures"))})
		na := "n/a"
		notified, watches, req, reqP, reads, children, getData, other, writes, redis := na, na, na, na, na, na, na, na, na, na
		if c.OpenNodes != nil {
			notified, watches = fmtF(m("notified"), 3), fmtF(m("zk_watches"), 3)
			req, reads, writes = fmtF(m("zk_req"), 2), fmtF(m("zk_reads"), 2), fmtF(m("zk_writes"), 2)
			children, getData, other = fmtF(m("zk_children"), 2), fmtF(m("zk_getdata"), 2), fmtF(m("zk_other_reads"), 2)
			_, reqP = r.zx("Z2", c.Name, "zk_req")
		} else {
			redis = fmtF(m("redis_cmds_client"), 1) + " / " + fmtF(m("redis_cmds_all"), 1)
		}
		traffic = append(traffic, []string{c.Name, fmtInt(m("acq_all")), fmtInt(m("handoffs_all")), notified, watches,
			req, reqP, reads, children, getData, other, writes, redis})
	}
	fmt.Fprintf(b, "### Z2 — ZooKeeper hand-over: %d independent clients (each its own session) on one lock (blocking Lock, hold %s busy work)\n\n",
		r.cfg.Clients, r.cfg.Hold)
	table(b, []string{"contender", "handoff p50 (from Release call)", "× dlock-redis", "× zk.Lock", "handoff p99", "× dlock-redis",
		"× zk.Lock", "longest handoff (all reps)", "longest first Lock (all reps)", "acq/s", "× dlock-redis", "× zk.Lock", "p50 from Release returning", "hand-overs", "share min–max (× fair)",
		"overlaps", "failed Lock/Release"}, rows)
	b.WriteString("Z2 traffic, per hand-over and per acquisition over the whole loop (drain included):\n\n")
	table(b, []string{"contender", "acquisitions", "hand-overs", "watch notifications/hand-over (client callbacks, all clients)",
		"watches fired/hand-over (servers, mntr)", "ZK requests/acq (packets_received, pings incl.)", "× zk.Lock", "ZK reads/acq",
		"getChildren/acq", "getData/acq", "exists + ping/acq", "ZK writes/acq", "Redis cmds/acq (client-sent / all)"}, traffic)
}

func (r *Results) zkNotes(b *strings.Builder) {
	if !r.ranZK() {
		return
	}
	b.WriteString("### Z1, Z2: contenders and definitions\n\n")
	for _, c := range r.zk {
		if r.runs["Z1"][c.Name] != nil || r.runs["Z2"][c.Name] != nil {
			fmt.Fprintf(b, "- **%s**: %s\n", c.Name, c.Config)
		}
	}
	fmt.Fprintf(b, `
- Z1 and Z2 always run these three contenders, whatever -contenders says. Each run opens its own clients
  (sessions, Redis clients) and uses its own lock path (ZooKeeper: /lockbench-dlock-zk/… for dlock-zk,
  /lockbench-zk-lock/… for zk.Lock) or key (Redis; FLUSHALL before every run). Before each scenario the first
  contender runs once untimed and is discarded; then every repetition runs each contender once, round-robin,
  in an order rotated between repetitions. Numbers are medians over repetitions; every "× dlock-redis" and
  "× zk.Lock" is the median of the per-repetition ratios (this row's value ÷ that contender's, same repetition;
  below 1 means lower: faster for latencies, fewer for counts, slower for cycles/s and acq/s).
- Each ZooKeeper client connects to one server only (a one-address server list), the same for every contender:
  Z1's client to a follower; in Z2, client i to server i mod %d in the order follower, follower, leader
  (clients 0, 3, 6 and 1, 4, 7 on the two followers, 2 and 5 on the leader). A follower forwards writes to the
  leader, which commits them by quorum; reads are served by the server the client is connected to.
- ZooKeeper counters come from mntr, sent to each of the %d servers before and after the measured part and
  summed over the servers: a client request is counted by the server its session is connected to.
  *ZK requests* = zk_packets_received delta: every request packet, **pings included** (go-zookeeper pings every
  session timeout × 1/3 ≈ 3.3s per connection whether busy or not) and the one mntr connection per server
  of the snapshot itself (each counts one packet). Nothing is subtracted. *ZK reads* = zk_cnt_readlatency
  delta (non-quorum requests: getChildren, getData, exists, and pings); split into *getChildren* =
  zk_response_packet_get_children_cache_hits + _misses, *getData* = zk_response_packet_cache_hits + _misses,
  and *exists + ping* = the rest. *ZK writes* = zk_cnt_updatelatency delta (quorum requests: create, delete,
  createContainer; session creation and closing fall outside the measured part). *Redis cmds* for dlock-redis =
  S3's counts from INFO: client-sent (commandstats deltas minus dlock's Lua-internal commands and INFO) and all
  (total_commands_processed, which counts commands run inside Lua).
- **Z1**: one client, one goroutine: lock + release of one fixed path (key), %s of untimed cycles on it
  first (which also makes the parents), then cycles for the run's duration. *p50/p99 cycle* = the time of
  one whole lock + release. Server counts are per cycle. dlock-zk's parents are container nodes, which the
  ensemble deletes when it finds them empty (checked every 1s here): a cycle that meets its path deleted pays
  the parents again (a create failing with NoNode, then a createContainer for each level), which shows as
  writes/cycle slightly above 2 (zk.Lock's parents are persistent).
- **Z2**: %d clients, each its own ZooKeeper session (or Redis client and lock client), loop: blocking Lock
  on one path, %s busy work, Release, Lock again at once — S3's loop, and the same analysis. Clients stop asking
  at the end of the run; a client still waiting then gets the lock once more and releases it (the *drain*),
  because cancelling a waiting Lock deletes its ZooKeeper node, which would wake its successor for nothing.
  *handoff* = for every release, the time from that **Release call** to the next acquisition, in ownership
  order, by a different client (p50, p99; never negative); *p50 from Release returning* is S3's main metric
  (can be negative); *longest handoff* and *longest first Lock* (from the start of the loop to the first
  acquisition) are the maxima over all repetitions, not medians: they show a stall that the medians hide;
  *acq/s*, *hand-overs* (share of consecutive acquisitions that changed client), *share*
  (each client's acquisitions ÷ an equal share) and *overlaps* (acquisitions granted before the previous holder
  called Release; must be 0) count acquisitions before the end. The traffic table covers the whole loop, drain
  included: *acquisitions* and *hand-overs* are its totals, and the counters are divided by them.
  *watch notifications/hand-over* = events of type EventNodeDeleted, EventNodeDataChanged and
  EventNodeChildrenChanged that the %d clients' event callbacks received (zklock.WithEventCallback for
  dlock-zk, zk.WithEventCallback at zk.Connect for zk.Lock), summed over the clients, ÷ hand-overs: 1.0 means
  each release woke exactly one waiter. *watches fired/hand-over* = the servers' own count of the same
  (zk_sum_node_{deleted,changed,children,created}_watch_count deltas) ÷ hand-overs, as a cross-check. The
  renewal of a dlock-zk lease (an exists every 1.1s while held) never runs in a %s hold.

`, ZKServers, ZKServers, r.cfg.Warmup, r.cfg.Clients, r.cfg.Hold, r.cfg.Clients, r.cfg.Hold)
}

// maxOver returns the largest value of metric k over the repetitions.
func (r *Results) maxOver(sc, name, k string) float64 {
	v := math.NaN()
	for _, m := range r.runs[sc][name] {
		if m != nil && (math.IsNaN(v) || m[k] > v) {
			v = m[k]
		}
	}
	return v
}
