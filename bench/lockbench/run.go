// Package lockbench benchmarks dlock's redislock against a raw go-redis
// floor and peer libraries on a redis-server it starts itself. See
// ../README.md.
package lockbench

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Scenario names, in run order.
var AllScenarios = []string{"S1", "L1", "S2", "S3", "R1", "S4", "S5", "S6", "R2", "Z1", "Z2", "P1", "P2", "M1", "M2"}

// Config is one benchmark run.
type Config struct {
	Duration   time.Duration // per scenario, contender and repetition
	Warmup     time.Duration // untimed cycles before S1 and S2
	Reps       int           // repetitions; medians are reported
	Scenarios  []string      // subset of AllScenarios
	Contenders []string      // subset of contender names; empty means all
	Goroutines int           // S2
	Clients    int           // S3
	Hold       time.Duration // S3: a holder's fixed work (busy spin)
	Leases     int           // R1
	R1TTL      time.Duration // R1: lease TTL; renewal period is TTL/3
	Rounds     int           // R1: renewal periods measured
	// R1HeapProfile, if set, is the file R1 writes a heap profile to,
	// once the leases are held and renewed once.
	R1HeapProfile string
	// S4: Redlock over RedlockNodes independent servers.
	RedlockGoroutines int           // S4b
	RedlockDuration   time.Duration // per S4 part, contender and repetition; 0 means Duration
	Short             bool          // recorded in the report only
	// Limit bounds the whole benchmark: no run starts after it (0: none).
	// Each run is bounded too (see runBound), so the benchmark ends by
	// about Limit plus one run's bound.
	Limit    time.Duration
	Progress io.Writer // progress lines; nil for none
}

// DefaultConfig is the full run; ShortConfig a quick smoke run.
func DefaultConfig() Config {
	return Config{Duration: 3 * time.Second, Warmup: 300 * time.Millisecond, Reps: 3,
		Scenarios: AllScenarios, Goroutines: 64, Clients: 8, Hold: 50 * time.Microsecond,
		Leases: 10000, R1TTL: 3 * time.Second, Rounds: 4, RedlockGoroutines: 16}
}

// s4Duration is the length of one S4 run.
func (c Config) s4Duration() time.Duration {
	if c.RedlockDuration > 0 {
		return c.RedlockDuration
	}
	return c.Duration
}

func ShortConfig() Config {
	c := DefaultConfig()
	c.Duration, c.Warmup, c.R1TTL, c.Rounds, c.Short = 500*time.Millisecond, 100*time.Millisecond, 3*time.Second, 2, true
	c.RedlockDuration = 200 * time.Millisecond // S4 has 12 runs per repetition: keep the smoke run brief
	return c
}

// Results holds every run's metrics: scenario (S4: its parts S4a, S4b,
// S4f) → contender → one per rep (nil where the run failed, with the error
// in errs).
type Results struct {
	cfg              Config
	contenders       []Contender // S1–S3, R1
	redlock          []Contender // S4
	issue4           []Contender // S5, S6, R2 (always all of them)
	zk               []Contender // Z1, Z2 (always all of them)
	pg               []Contender // P1, P2 (always all of them)
	my               []Contender // M1, M2 (always all of them)
	redis            string
	zookeeper        string // the Z ensemble's version
	postgres         string // the P server's version
	mariadb          string // the M server's version
	library          string
	rueidislockProbe string // why rueidislock is not an S4 contender
	start            time.Time
	elapsed          time.Duration
	runs             map[string]map[string][]Metrics
	errs             map[string]map[string][]string
	abandoned        int       // runs abandoned at their bound (see bounded)
	l1Ping           []Metrics // L1: PING round trips measured before each repetition (nil where it failed)
	l1Err            string    // L1: why the proxy could not start, if it could not
}

// Run starts a redis-server (for S4, RedlockNodes more; for Z1 and Z2, a
// ZooKeeper ensemble of ZKServers next to the redis-server; for P1 and
// P2, a PostgreSQL server next to it), runs every selected scenario for
// every contender, round-robin over contenders for each repetition (the
// order rotates between repetitions), and stops the servers.
func Run(cfg Config) (*Results, error) {
	for _, s := range cfg.Scenarios {
		if !slices.Contains(AllScenarios, s) {
			return nil, fmt.Errorf("unknown scenario %q; known: %s", s, strings.Join(AllScenarios, ","))
		}
	}
	cs, rs, err := selectContenders(cfg.Contenders)
	if err != nil {
		return nil, err
	}
	res := &Results{cfg: cfg, contenders: cs, redlock: rs, issue4: issue4Contenders(), zk: ZKContenders(), pg: PGContenders(), my: MContenders(), library: libraryState(), start: time.Now(),
		runs: map[string]map[string][]Metrics{}, errs: map[string]map[string][]string{}}
	if slices.ContainsFunc(cfg.Scenarios, func(s string) bool { return s != "S4" }) {
		srv, err := startServer()
		if err != nil {
			return nil, err
		}
		res.redis = srv.version
		progress(cfg, "redis-server %s on %s; GOMAXPROCS=%d", srv.version, srv.addr(), runtime.GOMAXPROCS(0))
		res.runSingle(srv)
		res.runZK(srv)
		res.runPG(srv)
		res.runM(srv)
		srv.close() // not left idling next to S4's nodes
	}
	if slices.Contains(cfg.Scenarios, "S4") {
		ns, err := startNodes(RedlockNodes)
		if err != nil {
			return nil, err
		}
		defer ns.close()
		res.redis = ns.version
		progress(cfg, "S4: %d redis-server %s nodes on %s; GOMAXPROCS=%d", RedlockNodes, ns.version,
			strings.Join(ns.addrs(), " "), runtime.GOMAXPROCS(0))
		res.runS4(ns)
	}
	res.elapsed = time.Since(res.start)
	return res, nil
}

// runSingle runs the selected scenarios of S1, S2, S3, R1, S5, S6 and R2
// on srv.
func (res *Results) runSingle(srv *server) {
	cfg, cs := res.cfg, res.contenders
	for _, sc := range AllScenarios {
		if sc == "S4" || slices.Contains(ZKScenarios, sc) || slices.Contains(PGScenarios, sc) || slices.Contains(MScenarios, sc) || !slices.Contains(cfg.Scenarios, sc) {
			continue
		}
		res.runs[sc], res.errs[sc] = map[string][]Metrics{}, map[string][]string{}
		group := cs
		run := func(c Contender, rep int) (Metrics, error) { return runOne(sc, c, srv, cfg, rep) }
		var lp *latencyProxy // L1's
		switch sc {
		case "L1":
			group = l1Group(cs)
			var err error
			if lp, err = startLatencyProxy(srv); err != nil {
				res.l1Err = err.Error()
				progress(cfg, "L1: %v", err)
				continue
			}
			res.l1Ping = make([]Metrics, cfg.Reps)
			run = func(c Contender, rep int) (Metrics, error) {
				if err := srv.flush(); err != nil {
					return nil, err
				}
				runtime.GC()
				return runL1(c, srv, lp, cfg)
			}
		case "S3":
			group = slices.DeleteFunc(slices.Clone(cs), func(c Contender) bool { return c.Name == "raw-rueidis" })
		case "R1":
			group = slices.DeleteFunc(slices.Clone(cs), func(c Contender) bool { return c.DlockTransport == "" })
		case "S5":
			group = S5Contenders()
		case "S6":
			group = S6Contenders()
		case "R2":
			group = []Contender{r2Contender()}
		}
		if len(group) == 0 {
			if lp != nil {
				lp.close()
			}
			continue
		}
		if sc != "R1" && sc != "R2" { // an untimed, discarded run first, so that no contender runs on a cold process
			_, err := res.bounded(func() (Metrics, error) { return run(group[0], -1) })
			progress(cfg, "%s warm-up run (discarded) %s", sc, brief(nil, err))
		}
		reps := cfg.Reps
		if sc == "R1" {
			reps = min(reps, 3) // renewal counts barely vary; spare the time
		}
		for rep := range reps {
			if sc == "L1" {
				m, err := lp.measurePing(srv, 200)
				res.l1Ping[rep] = m
				progress(cfg, "L1 rep %d/%d PING %s", rep+1, reps, brief(m, err))
			}
			for i := range group {
				c := group[(i+rep)%len(group)]
				m, err := res.bounded(func() (Metrics, error) { return run(c, rep) })
				res.record(sc, c.Name, rep, m, err)
				progress(cfg, "%s rep %d/%d %-14s %s", sc, rep+1, reps, c.Name, brief(m, err))
			}
		}
		if lp != nil {
			lp.close()
		}
	}
}

// runS4 runs S4 on ns. Within each repetition it runs S4a for every
// contender, then S4b, then S4f for the dlock contenders, each round-robin
// in an order rotated between repetitions, so that a slowdown of the
// machine hits all parts of one repetition alike.
func (res *Results) runS4(ns *nodes) {
	cfg := res.cfg
	res.rueidislockProbe = rueidislockRedlockProbe(ns.addrs())
	progress(cfg, "S4 rueidislock: %s", res.rueidislockProbe)
	groups := map[string][]Contender{"S4a": res.redlock, "S4b": res.redlock,
		"S4f": slices.DeleteFunc(slices.Clone(res.redlock), func(c Contender) bool { return c.DlockTransport == "" })}
	for _, part := range s4Parts {
		res.runs[part], res.errs[part] = map[string][]Metrics{}, map[string][]string{}
		if part != "S4f" && len(groups[part]) > 0 { // no contender on cold processes
			_, err := res.bounded(func() (Metrics, error) { return runS4Part(part, groups[part][0], ns, cfg) })
			progress(cfg, "%s warm-up run (discarded) %s", part, brief(nil, err))
		}
	}
	for rep := range cfg.Reps {
		for _, part := range s4Parts {
			group := groups[part]
			for i := range group {
				c := group[(i+rep)%len(group)]
				runtime.GC()
				m, err := res.bounded(func() (Metrics, error) { return runS4Part(part, c, ns, cfg) })
				res.record(part, c.Name, rep, m, err)
				progress(cfg, "%s rep %d/%d %-22s %s", part, rep+1, cfg.Reps, c.Name, brief(m, err))
			}
		}
	}
}

func runOne(sc string, c Contender, srv *server, cfg Config, rep int) (Metrics, error) {
	if err := srv.flush(); err != nil {
		return nil, err
	}
	runtime.GC()
	switch sc {
	case "S1":
		return runS1(c, srv, cfg)
	case "S2":
		return runS2(c, srv, cfg)
	case "S3":
		return runS3(c, srv, cfg, rep)
	case "S5":
		return runS5(c, srv, cfg, rep)
	case "S6":
		return runS6(c, srv, cfg, rep)
	case "R2":
		return runR2(srv, cfg)
	default:
		return runR1(c.DlockTransport, srv, cfg)
	}
}

func (r *Results) record(sc, name string, rep int, m Metrics, err error) {
	if r.runs[sc][name] == nil {
		r.runs[sc][name] = make([]Metrics, r.cfg.Reps)
		r.errs[sc][name] = make([]string, r.cfg.Reps)
	}
	r.runs[sc][name][rep] = m
	if err != nil {
		r.errs[sc][name][rep] = err.Error()
	}
}

func progress(cfg Config, format string, args ...any) {
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, format+"\n", args...)
	}
}

func brief(m Metrics, err error) string {
	if err != nil {
		return "ERROR: " + err.Error()
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%.4g ", k, m[k])
	}
	return b.String()
}
