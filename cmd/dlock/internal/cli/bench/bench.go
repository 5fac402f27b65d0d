package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/backend"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// ConnectTimeout bounds connecting to the lock service, and each client's
// connection in S3.
const ConnectTimeout = 15 * time.Second

// Main runs "dlock bench" with args (without "bench") and returns the exit
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
	spec, err := o.Backend.Resolve(io.Getenv)
	if err == nil {
		err = checkTarget(&o, spec)
	}
	spec.LongestTTL = o.TTL
	for _, w := range spec.Warnings {
		fmt.Fprintln(io.Err, "dlock:", w)
	}
	if err != nil {
		return cmdutil.Fail(io, fmt.Errorf("dlock bench: %w", err), cmdutil.ExitUsage)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := &runner{o: o, io: io, spec: spec, prog: &progress{w: io.Err, tty: cmdutil.IsTerminal(io.Err)}}
	return r.run(ctx)
}

// checkTarget checks what depends on the kind of backend: the lock names,
// the lock kind, and that the chart can be written, so that a run does not
// fail after it has done its work.
func checkTarget(o *Options, spec backend.Spec) error {
	if err := backend.CheckName(spec.Kind(), o.name("S1")); err != nil {
		return cmdutil.Usagef("--prefix %q: %v", o.Prefix, err)
	}
	if err := backend.CheckKind(spec, o.Kind); err != nil {
		return err
	}
	if o.Chart != "" {
		f, err := os.CreateTemp(filepath.Dir(o.Chart), ".dlock-bench-*.svg")
		if err != nil {
			return cmdutil.Usagef("--chart %s cannot be written (%v); give a file in a writable directory", o.Chart, err)
		}
		f.Close()
		os.Remove(f.Name())
	}
	return nil
}

type runner struct {
	o      Options
	io     cmdutil.IO
	spec   backend.Spec
	prog   *progress
	target *backend.Target
}

// say writes one line to stderr, prefixed with "dlock bench: ".
func (r *runner) say(format string, args ...any) {
	r.prog.line(fmt.Sprintf("dlock bench: "+format, args...))
}

func (r *runner) lockOptions() backend.LockOptions {
	return backend.LockOptions{Kind: r.o.Kind, Permits: r.o.Permits, TTL: r.o.TTL}
}

func (r *runner) run(ctx context.Context) int {
	cctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	t, err := backend.Connect(cctx, r.spec, nil)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			r.say("interrupted while connecting to %s", r.spec.Kind())
			return interrupted
		}
		r.say("cannot reach %s: %v", r.spec.Kind(), err)
		return cmdutil.ExitUnavailable
	}
	r.target = t
	defer t.Close()
	if err := r.preflight(ctx); err != nil {
		switch {
		case cmdutil.IsUsage(err):
			return cmdutil.Fail(r.io, fmt.Errorf("dlock bench: %w", err), cmdutil.ExitUsage)
		case ctx.Err() != nil:
			r.say("interrupted before the first scenario")
			return interrupted
		}
		r.say("%s: %v", t.Describe(), err)
		return cmdutil.ExitUnavailable
	}

	rep := newReport(r)
	for _, id := range r.o.Scenarios {
		if ctx.Err() != nil {
			break
		}
		for _, res := range r.scenario(id)(ctx) {
			r.prog.finished(res)
			rep.Results = append(rep.Results, res)
		}
	}
	rep.Interrupted = ctx.Err() != nil
	rep.Elapsed = time.Since(rep.Started)

	var werr error
	if r.o.Format == FormatJSON {
		werr = rep.writeJSON(r.io.Out)
	} else {
		werr = rep.writeTable(r.io.Out)
	}
	if werr != nil {
		r.say("writing the results: %v", werr)
		return cmdutil.ExitError
	}
	if r.o.Chart != "" {
		if err := os.WriteFile(r.o.Chart, rep.chart(), 0o644); err != nil {
			r.say("writing --chart: %v", err)
			return cmdutil.ExitError
		}
	}
	return r.exitCode(rep)
}

// interrupted is the exit code after SIGINT, as a shell reports it.
const interrupted = 128 + int(syscall.SIGINT)

func (r *runner) scenario(id string) func(context.Context) []*Result {
	switch id {
	case "S1":
		return r.s1
	case "S2":
		return r.s2
	case "S3":
		return r.s3
	}
	return r.s4
}

// exitCode: a safety violation first, then an interrupt, then a scenario
// (S1-S3; S4 reports failing nodes in its rows) that completed nothing.
func (r *runner) exitCode(rep *report) int {
	var violations int64
	for _, res := range rep.Results {
		violations += res.Overlaps + res.Regressions
	}
	if violations > 0 {
		r.say("mutual exclusion was violated %d times; see the overlaps and errors above", violations)
		return cmdutil.ExitError
	}
	if rep.Interrupted {
		return interrupted
	}
	for _, res := range rep.Results {
		if res.ID != "S4" && res.Ops == 0 {
			r.say("%s completed no lock; the lock service is unavailable or failing", res.ID)
			return cmdutil.ExitUnavailable
		}
	}
	return cmdutil.ExitOK
}

// preflight takes and releases S1's lock once, so that an unusable service
// fails before the first scenario. The nodes of a new Redlock deployment
// vote only one TTL after their first use: it waits for that.
func (r *runner) preflight(ctx context.Context) error {
	name := r.o.name("S1")
	l, err := r.target.Locker(name, r.lockOptions())
	if err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	lease, err := l.TryLock(tctx)
	cancel()
	if errors.Is(err, dlock.ErrNotObtained) && ctx.Err() == nil {
		wait := r.o.TTL + lockWaitSlack
		r.say("lock %q not obtained at once (%v); waiting up to %v for it", name, err, wait)
		wctx, cancel := context.WithTimeout(ctx, wait)
		lease, err = l.Lock(wctx)
		cancel()
		if errors.Is(err, dlock.ErrNotObtained) && ctx.Err() == nil {
			err = fmt.Errorf("%w; another owner may use the name: choose another --prefix", err)
		}
	}
	if err != nil {
		return fmt.Errorf("lock %q: %w", name, err)
	}
	return release(lease)
}
