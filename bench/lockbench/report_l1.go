package lockbench

import (
	"fmt"
	"strings"
)

// l1Target is issue 35's target 6: dlock's S1 through 0.5ms each way
// within 5% of the floor's cycles/s.
const l1Target = 0.95

// l1 writes L1's table: S1 through the latency proxy.
func (r *Results) l1(b *strings.Builder) []check {
	fmt.Fprintf(b, "### L1 — S1 across a network: 1 goroutine, uncontended, fresh key per cycle, through the fault proxy adding %s each way\n\n", L1Latency)
	if r.l1Err != "" {
		fmt.Fprintf(b, "Not run: the proxy did not start: %s\n\n", r.l1Err)
		return nil
	}
	floor := r.floor()
	var rows [][]string
	var checks []check
	for _, c := range l1Group(r.contenders) {
		if !r.has("L1", c.Name) {
			continue
		}
		x := r.rel("L1", c.Name, floor, "ops")
		t := ""
		if c.Floor {
			t = "floor"
		}
		if c.DlockTransport != "" {
			ok := x >= l1Target
			t = fmt.Sprintf("≥ %.2f× %s", l1Target, passFail(ok))
		}
		rows = append(rows, []string{c.Name, fmtInt(r.med("L1", c.Name, "ops")), fmtX(x),
			fmtDur(r.med("L1", c.Name, "p50")), fmtDur(r.med("L1", c.Name, "p99")),
			fmtF(r.med("L1", c.Name, "round_trips"), 2), fmtF(r.med("L1", c.Name, "redis_cmds_client"), 2),
			fmtF(r.med("L1", c.Name, "redis_cmds_all"), 2), fmtDur(r.med("L1", c.Name, "srv_cpu")), t})
	}
	table(b, []string{"contender", "cycles/s", "× raw", "p50 cycle", "p99 cycle", "round trips/cycle (proxy)",
		"client-sent cmds/cycle", "server cmds/cycle (incl. Lua)", "server CPU/cycle", "target"}, rows)
	var ping []string
	for rep, m := range r.l1Ping {
		if m == nil {
			ping = append(ping, fmt.Sprintf("rep %d: not measured", rep+1))
			continue
		}
		ping = append(ping, fmt.Sprintf("rep %d: %s direct, %s through the proxy with no delay, %s with %s each way: %s added each way",
			rep+1, fmtDur(m["ping_direct"]), fmtDur(m["ping_proxy0"]), fmtDur(m["ping_proxy"]), L1Latency, fmtDur(m["added_each_way"])))
	}
	fmt.Fprintf(b, "PING round trip (go-redis, p50 of 200): %s.\n\n", strings.Join(ping, "; "))
	return checks
}
