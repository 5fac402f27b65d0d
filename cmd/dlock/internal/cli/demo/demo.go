package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/backend"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/internal/servers"
)

// Timeout bounds the whole demo; with the default flags it takes about ten
// seconds.
const Timeout = 3 * time.Minute

// exitInterrupted is the exit code after Ctrl-C: 128 + SIGINT.
const exitInterrupted = 130

// errUnavailable marks a server that could not be started.
var errUnavailable = errors.New("server unavailable")

// Main runs "dlock demo" with args (without "demo") and returns the exit
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
	if _, err := servers.LookBinary("redis-server"); err != nil {
		fmt.Fprintln(io.Err, "dlock demo: redis-server is not installed; run 'make demo', or 'apt-get install redis-server', and try again")
		return cmdutil.ExitUnavailable
	}

	backend.QuietRedisLogs() // a killed node's failed dials are part of the story, told by the demo
	// Ctrl-C cancels ctx; every part then returns, and its deferred
	// clean-ups stop its servers and remove their directories.
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(sigCtx, Timeout)
	defer cancel()

	d := &demo{o: o, out: &printer{w: io.Out}}
	err = d.run(ctx)
	switch {
	case sigCtx.Err() != nil:
		fmt.Fprintln(io.Err, "dlock demo: interrupted; every server it started is stopped")
		return exitInterrupted
	case ctx.Err() != nil:
		fmt.Fprintf(io.Err, "dlock demo: did not finish within %v; every server it started is stopped\n", Timeout)
		return cmdutil.ExitError
	case errors.Is(err, errUnavailable):
		fmt.Fprintln(io.Err, "dlock demo:", err)
		return cmdutil.ExitUnavailable
	case err != nil:
		fmt.Fprintln(io.Err, "dlock demo:", err)
		return cmdutil.ExitError
	case d.violations() > 0:
		fmt.Fprintf(io.Err, "dlock demo: %d violation(s) of mutual exclusion or fence order; this is a bug, please report it with the output above\n", d.violations())
		return cmdutil.ExitError
	}
	return cmdutil.ExitOK
}

// A demo is one run of "dlock demo".
type demo struct {
	o   Options
	out *printer

	// What each part found, for the summary.
	redis, redlock, zk, zkCutBoard *board
	redlockHandover                time.Duration // longest Redlock hand-over outside the stall
	redlockStall                   time.Duration // no grants while C sat out and B was paused
	staleRefused                   bool          // the stale holder was told and refused
	zkSkipped                      string        // why the ZooKeeper part did not run
}

func (d *demo) run(ctx context.Context) error {
	d.out.printf("dlock demo: private servers on 127.0.0.1, %d workers, %d rounds each.\n", d.o.Workers, d.o.Rounds)
	if err := d.redisPart(ctx); err != nil {
		return err
	}
	if err := d.redlockPart(ctx); err != nil {
		return err
	}
	if err := d.zkPart(ctx); err != nil {
		return err
	}
	d.summary()
	return nil
}

// heading prints the title of a part.
func (d *demo) heading(title string) {
	d.out.printf("\n%s\n%s\n", title, strings.Repeat("-", len(title)))
}

func (d *demo) boards() []*board {
	var bs []*board
	for _, b := range []*board{d.redis, d.redlock, d.zk, d.zkCutBoard} {
		if b != nil {
			bs = append(bs, b)
		}
	}
	return bs
}

// violationList returns what the boards saw go wrong.
func (d *demo) violationList() []string {
	var v []string
	for _, b := range d.boards() {
		b.mu.Lock()
		v = append(v, b.violations...)
		b.mu.Unlock()
	}
	return v
}

func (d *demo) violations() int { return len(d.violationList()) }

func (d *demo) summary() {
	d.heading("Summary")
	var (
		grants int
		counts []string
		hand   []string
	)
	count := func(name string, bs ...*board) {
		n := 0
		for _, b := range bs {
			if b != nil {
				n += b.stats(0).grants
			}
		}
		if n > 0 {
			grants += n
			counts = append(counts, fmt.Sprintf("%d on %s", n, name))
		}
	}
	count("one Redis", d.redis)
	count("Redlock", d.redlock)
	count("ZooKeeper", d.zk, d.zkCutBoard)
	if d.redis != nil {
		hand = append(hand, "one Redis "+ms(d.redis.stats(0).maxHandover))
	}
	if d.redlock != nil {
		hand = append(hand, fmt.Sprintf("Redlock %s (polling), apart from the %.2fs stall", ms(d.redlockHandover), d.redlockStall.Seconds()))
	}
	if d.zk != nil {
		hand = append(hand, "ZooKeeper "+ms(d.zk.stats(0).maxHandover))
	}
	d.out.printf("Grants:        %d (%s)\n", grants, strings.Join(counts, ", "))
	d.out.printf("Hand-over:     longest %s\n", strings.Join(hand, "; "))
	v := d.violationList()
	d.out.printf("Violations:    %d (two workers holding valid leases at once, or a fence not above the one before)\n", len(v))
	for _, line := range v {
		d.out.printf("  VIOLATION: %s\n", line)
	}
	if d.staleRefused {
		d.out.printf("Stale holder:  told on Done() when its lease ran out; its late write refused by its fence\n")
	}
	if d.zkSkipped != "" {
		d.out.printf("ZooKeeper:     skipped (%s)\n", d.zkSkipped)
	}
	d.out.printf("\nNext: 'dlock run --redis redis://HOST:6379 NAME -- COMMAND' runs a command while holding a lock;\n")
	d.out.printf("README.md shows the Go API and which lock to choose for a deployment.\n")
}
