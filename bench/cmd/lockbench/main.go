// Command lockbench runs dlock's lock benchmarks against a raw go-redis
// floor and peer libraries on a redis-server it starts itself (and, for Z1
// and Z2, a 3-server ZooKeeper ensemble; for P1 and P2, a PostgreSQL
// server), and prints a markdown report.
//
//	cd bench && go run ./cmd/lockbench [-short] [-duration 3s] [-runs 2] [-scenarios S1,L1,S2,S3,R1,S4,Z1,Z2,P1,P2,M1,M2] [-out FILE]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dlock-go/dlock/bench/lockbench"
	"github.com/dlock-go/dlock/internal/servers"
)

func main() {
	def := lockbench.DefaultConfig()
	short := flag.Bool("short", false, "quick smoke run: 0.5s per run, shorter R1")
	duration := flag.Duration("duration", 0, "time per scenario per contender per repetition (default 3s; 0.5s with -short, S4 0.2s)")
	scenarios := flag.String("scenarios", strings.Join(lockbench.AllScenarios, ","), "comma-separated scenarios to run")
	contenders := flag.String("contenders", "", "comma-separated contenders (the raw floor is always included); empty for all")
	reps := flag.Int("reps", def.Reps, "repetitions; medians are reported")
	hold := flag.Duration("hold", def.Hold, "S3, S5, Z2, P2: busy work while holding the lock")
	leases := flag.Int("leases", def.Leases, "R1: leases held by one client")
	r1TTL := flag.Duration("r1-ttl", 0, "R1: the leases' TTL; renewal every TTL/3 (default 3s, also with -short)")
	r1Heap := flag.String("r1-heapprofile", "", "R1: write a heap profile to this file once the leases are held")
	limit := flag.Duration("limit", 2*time.Hour, "start no run after this long (per -runs run); the benchmark then ends within one run's bound (0: no limit)")
	out := flag.String("out", "", "write the markdown report to this file (default: stdout only)")
	quiet := flag.Bool("q", false, "no progress lines on stderr")
	runs := flag.Int("runs", 1, "complete runs, one after the other, each with its own servers; the report shows issue 35's targets with every run's figures, then each run's report")
	flag.Parse()

	cfg := def
	if *short {
		cfg = lockbench.ShortConfig()
	}
	if *duration > 0 {
		cfg.Duration, cfg.RedlockDuration = *duration, 0
	}
	cfg.Scenarios = split(*scenarios)
	cfg.Contenders = split(*contenders)
	cfg.Reps, cfg.Hold, cfg.Leases, cfg.Limit = max(1, *reps), *hold, *leases, *limit
	cfg.R1HeapProfile = *r1Heap
	if *r1TTL > 0 {
		cfg.R1TTL = *r1TTL
	}
	if !*quiet {
		cfg.Progress = os.Stderr
	}

	// Stop the server on Ctrl-C (it would die with us anyway: Pdeathsig).
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		servers.StopAll()
		os.Exit(130)
	}()

	if *runs < 1 {
		fmt.Fprintln(os.Stderr, "lockbench: -runs must be at least 1")
		os.Exit(2)
	}
	if *limit < 0 {
		fmt.Fprintln(os.Stderr, "lockbench: -limit must not be negative")
		os.Exit(2)
	}
	if *limit > 0 {
		// Runs are bounded one by one; this is the last resort if
		// something outside them (starting or stopping a server) hangs.
		hard := time.Duration(max(1, *runs))*(*limit) + 2*lockbench.RunBound(cfg)
		time.AfterFunc(hard, func() {
			fmt.Fprintf(os.Stderr, "lockbench: still running %s after start (-limit %s): giving up\n", hard, *limit)
			servers.StopAll()
			os.Exit(1)
		})
	}
	start := time.Now()
	var all []*lockbench.Results
	for i := range max(1, *runs) {
		if *runs > 1 && cfg.Progress != nil {
			fmt.Fprintf(os.Stderr, "run %d of %d\n", i+1, *runs)
		}
		res, err := lockbench.Run(cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "lockbench:", err)
			os.Exit(1)
		}
		all = append(all, res)
	}
	md := lockbench.Combined(all)
	fmt.Print(md)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(md), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "lockbench:", err)
			os.Exit(1)
		}
	}
	if cfg.Progress != nil {
		fmt.Fprintf(os.Stderr, "done in %s\n", time.Since(start).Round(time.Second))
	}
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
