package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dlock-go/dlock/chaos"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/backend"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// exitInterrupted is the exit code after Ctrl-C: 128 + SIGINT.
const exitInterrupted = 130

// Main runs "dlock chaos" with args (without "chaos") and returns the exit
// code.
func Main(args []string, io cmdutil.IO) int {
	o, err := Parse(args)
	if errors.Is(err, cmdutil.ErrHelp) {
		cmdutil.PrintUsage(io.Out, Usage, FlagSet(new(Options)))
		return cmdutil.ExitOK
	}
	if err != nil {
		return cmdutil.Fail(io, err, cmdutil.ExitUsage)
	}
	if o.Timeline != "" { // fail now, not after the run
		f, err := os.CreateTemp(filepath.Dir(o.Timeline), ".dlock-chaos-*.html")
		if err != nil {
			return cmdutil.Fail(io, cmdutil.Usagef("dlock chaos: --timeline %s cannot be written (%v); give a file in a writable directory", o.Timeline, err), cmdutil.ExitUsage)
		}
		f.Close()
		os.Remove(f.Name())
	}
	backends, err := available(o, io)
	if err != nil {
		return cmdutil.Fail(io, err, cmdutil.ExitUnavailable)
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64N(1<<53) + 1 // small enough to survive JSON tools that read numbers as floats
	}
	backend.QuietRedisLogs()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Fprintf(io.Err, "dlock chaos: %d clients, TTL %v, %v per backend, seed %d (repeat with --seed %d)\n",
		o.Clients, o.TTL, o.Duration, o.Seed, o.Seed)
	var results []*chaos.Result
	tty := cmdutil.IsTerminal(io.Err)
	for _, b := range backends {
		if ctx.Err() != nil {
			break
		}
		res, err := chaos.Run(ctx, o.runOptions(b, tty, io))
		if tty {
			fmt.Fprint(io.Err, "\r\033[K")
		}
		if err != nil {
			code := cmdutil.ExitError
			if errors.Is(err, chaos.ErrUnavailable) {
				code = cmdutil.ExitUnavailable
			}
			return cmdutil.Fail(io, fmt.Errorf("dlock chaos: %s: %w", b, err), code)
		}
		v := res.Verdict
		fmt.Fprintf(io.Err, "dlock chaos: %s: %d faults, %d grants, %d violations, %d outside the documented limits\n",
			b, v.Faults, v.Grants, len(v.Violations), len(v.Unexplained()))
		results = append(results, res)
	}
	if err := write(o, io, results); err != nil {
		return cmdutil.Fail(io, fmt.Errorf("dlock chaos: %w", err), cmdutil.ExitError)
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(io.Err, "dlock chaos: interrupted; the results cover only what ran")
		return exitInterrupted
	case !allOK(results):
		return cmdutil.ExitError
	}
	return cmdutil.ExitOK
}

// available returns the backends to run: all those asked for, or, when
// none was named, all whose servers are installed.
func available(o Options, io cmdutil.IO) ([]string, error) {
	var out []string
	for _, b := range o.Backends {
		server, pkg, err := chaos.Needs(b)
		switch {
		case err == nil:
		case server == "redis-server": // every backend's baseline: never skipped
			return nil, fmt.Errorf("dlock chaos: --backend %s needs redis-server, which is not installed; run 'make deps', or 'apt-get install redis-server', and try again", b)
		case !o.AllBackends:
			return nil, fmt.Errorf("dlock chaos: --backend %s needs %s: %v", b, server, err)
		default:
			fmt.Fprintf(io.Err, "dlock chaos: %s is not installed; skipping %s (apt-get install %s)\n", server, b, pkg)
			continue
		}
		out = append(out, b)
	}
	return out, nil
}

// runOptions returns the harness's options for backend b.
func (o Options) runOptions(b string, tty bool, io cmdutil.IO) chaos.Options {
	ro := chaos.Options{Backend: b, Duration: o.Duration, Clients: o.Clients, TTL: o.TTL, Work: o.Work,
		SessionTimeout: o.SessionTimeout, Faults: o.faultsFor(b), Random: o.Schedule == "random", Seed: o.Seed,
		LibraryDefaults: o.Defaults, TLS: o.TLS}
	if tty {
		ro.Progress = func(p chaos.Progress) {
			fault := ""
			if p.Fault != "" {
				fault = ", now: " + p.Fault
			}
			fmt.Fprintf(io.Err, "\r\033[K%s %v/%v: %d grants, %d failed acquisitions, %d faults%s",
				b, p.Elapsed.Round(time.Second), p.Duration, p.Grants, p.Failures, p.Faults, fault)
		}
	}
	return ro
}

// write prints the results and writes the timeline.
func write(o Options, io cmdutil.IO, results []*chaos.Result) error {
	if o.Timeline != "" {
		f, err := os.Create(o.Timeline)
		if err != nil {
			return fmt.Errorf("--timeline: %w", err)
		}
		if err := chaos.WriteTimeline(f, results); err != nil {
			f.Close()
			return fmt.Errorf("--timeline: %w", err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("--timeline: %w", err)
		}
		fmt.Fprintf(io.Err, "dlock chaos: timeline written to %s\n", o.Timeline)
	}
	if o.Format == FormatJSON {
		return chaos.WriteJSON(io.Out, results)
	}
	return chaos.WriteSummary(io.Out, results)
}

func allOK(results []*chaos.Result) bool {
	for _, r := range results {
		if !r.Verdict.OK() || len(r.ClientNotes) > 0 {
			return false
		}
	}
	return true
}
