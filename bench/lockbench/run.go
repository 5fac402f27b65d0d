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
var AllScenarios = []string{"S1", "S2", "S3", "R1"}

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
	Short      bool          // recorded in the report only
	Progress   io.Writer     // progress lines; nil for none
}

// DefaultConfig is the full run; ShortConfig a quick smoke run.
func DefaultConfig() Config {
	return Config{Duration: 3 * time.Second, Warmup: 300 * time.Millisecond, Reps: 3,
		Scenarios: AllScenarios, Goroutines: 64, Clients: 8, Hold: 50 * time.Microsecond,
		Leases: 10000, R1TTL: 3 * time.Second, Rounds: 4}
}

func ShortConfig() Config {
	c := DefaultConfig()
	c.Duration, c.Warmup, c.R1TTL, c.Rounds, c.Short = 500*time.Millisecond, 100*time.Millisecond, 1500*time.Millisecond, 2, true
	return c
}

// Results holds every run's metrics: scenario → contender → one per rep
// (nil where the run failed, with the error in errs).
type Results struct {
	cfg        Config
	contenders []Contender
	redis      string
	library    string
	start      time.Time
	elapsed    time.Duration
	runs       map[string]map[string][]Metrics
	errs       map[string]map[string][]string
}

// Run starts a redis-server, runs every selected scenario for every
// contender, round-robin over contenders for each repetition (the order
// rotates between repetitions), and stops the server.
func Run(cfg Config) (*Results, error) {
	for _, s := range cfg.Scenarios {
		if !slices.Contains(AllScenarios, s) {
			return nil, fmt.Errorf("unknown scenario %q; known: %s", s, strings.Join(AllScenarios, ","))
		}
	}
	cs, err := selectContenders(cfg.Contenders)
	if err != nil {
		return nil, err
	}
	srv, err := startServer()
	if err != nil {
		return nil, err
	}
	defer srv.close()
	res := &Results{cfg: cfg, contenders: cs, redis: srv.version, library: libraryState(), start: time.Now(),
		runs: map[string]map[string][]Metrics{}, errs: map[string]map[string][]string{}}
	progress(cfg, "redis-server %s on %s; GOMAXPROCS=%d", srv.version, srv.addr(), runtime.GOMAXPROCS(0))
	for _, sc := range AllScenarios {
		if !slices.Contains(cfg.Scenarios, sc) {
			continue
		}
		res.runs[sc], res.errs[sc] = map[string][]Metrics{}, map[string][]string{}
		group := cs
		if sc == "R1" {
			group = slices.DeleteFunc(slices.Clone(cs), func(c Contender) bool { return c.DlockTransport == "" })
		}
		if sc != "R1" { // an untimed, discarded run first, so that no contender runs on a cold process
			_, err := runOne(sc, group[0], srv, cfg, -1)
			progress(cfg, "%s warm-up run (discarded) %s", sc, brief(nil, err))
		}
		reps := cfg.Reps
		if sc == "R1" {
			reps = min(reps, 3) // renewal counts barely vary; spare the time
		}
		for rep := range reps {
			for i := range group {
				c := group[(i+rep)%len(group)]
				m, err := runOne(sc, c, srv, cfg, rep)
				res.record(sc, c.Name, rep, m, err)
				progress(cfg, "%s rep %d/%d %-14s %s", sc, rep+1, reps, c.Name, brief(m, err))
			}
		}
	}
	res.elapsed = time.Since(res.start)
	return res, nil
}

func runOne(sc string, c Contender, srv *server, cfg Config, rep int) (Metrics, error) {
	if err := srv.flush(); err != nil {
		return nil, err
	}
	runtime.GC()
	switch sc {
	case "S1":
		return runS1(c, srv.addr(), cfg)
	case "S2":
		return runS2(c, srv.addr(), cfg)
	case "S3":
		return runS3(c, srv, cfg, rep)
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
