// Command etcdbench compares dlock's etcdlock.Mutex with etcd's own
// concurrency.Mutex on a 3-member etcd cluster it starts itself, and prints
// a markdown table (see package etcdbench).
//
//	cd bench && go run ./cmd/etcdbench [-short] [-duration 3s] [-reps 3] [-clients 8]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/dlock-go/dlock/bench/etcdbench"
	"github.com/dlock-go/dlock/internal/servers"
)

func main() {
	def := etcdbench.DefaultConfig()
	short := flag.Bool("short", false, "quick smoke run: 0.5s per run, one repetition")
	duration := flag.Duration("duration", 0, "time per scenario per contender per repetition (default 3s)")
	reps := flag.Int("reps", 0, "repetitions; medians are reported (default 3)")
	clients := flag.Int("clients", def.Clients, "E2: independent clients")
	hold := flag.Duration("hold", def.Hold, "E2: busy work while holding the lock")
	quiet := flag.Bool("q", false, "no progress lines on stderr")
	flag.Parse()
	cfg := def
	if *short {
		cfg = etcdbench.ShortConfig()
	}
	if *duration > 0 {
		cfg.Duration = *duration
	}
	if *reps > 0 {
		cfg.Reps = *reps
	}
	cfg.Clients, cfg.Hold = *clients, *hold
	if cfg.Clients < 2 || cfg.Duration <= 0 || cfg.Hold < 0 {
		fmt.Fprintln(os.Stderr, "etcdbench: -clients must be at least 2, -duration positive and -hold not negative")
		os.Exit(64)
	}
	if _, err := servers.LookEtcd(); err != nil {
		fmt.Fprintln(os.Stderr, "etcdbench:", err)
		os.Exit(69)
	}
	progress := func(format string, args ...any) {
		if !*quiet {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		}
	}
	rows, err := etcdbench.Run(cfg, progress)
	servers.StopAll()
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdbench:", err)
		os.Exit(1)
	}
	fmt.Print(etcdbench.Markdown(rows, cfg))
}
