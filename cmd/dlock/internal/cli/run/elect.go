package run

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/backend"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// ExitNoLeader is the exit code of "dlock elect --leader" when the
// election has no leader.
const ExitNoLeader = 3

// ElectUsage is the help text of "dlock elect".
const ElectUsage = `Usage: dlock elect [flags] NAME -- COMMAND [ARGS...]
       dlock elect [flags] -- NAME -- COMMAND [ARGS...]  (NAME starting with -)
       dlock elect --leader [flags] NAME
       dlock elect --observe [flags] NAME

Campaigns in the election NAME and runs COMMAND only while this process
leads it. The leader holds the mutex NAME (so "dlock inspect NAME" shows
it, and "dlock release --force NAME" deposes it) and publishes --value
next to it; COMMAND gets DLOCK_NAME, DLOCK_TOKEN and DLOCK_FENCE, the
term, which strictly increases from one leader to the next. It is run
as "dlock run --wait forever" runs it: supervised with every process it
starts, stopped with SIGTERM, then SIGKILL after --grace, when the
leadership is lost or cannot be renewed in time, and the leadership is
resigned, for another campaign to win at once, when COMMAND and its
processes have exited. Without --again, a lost leadership ends dlock
with 76; with --again, dlock campaigns again once COMMAND is stopped,
and runs it anew when it leads again, until COMMAND exits by itself or
dlock gets a signal. A campaign waits for a lock service that is
unavailable, at the start too, as "dlock run --wait forever" does.

With --leader, dlock prints the current leader, as its term, a space and
its value, and exits 0, or exits 3 if there is none. The value is shown as
"dlock inspect" shows stored values: cut to 256 bytes, and quoted with
Go's escapes if it holds a control character. With --observe, dlock
does not campaign: it prints the leader, then each new one, a line each,
until SIGINT or SIGTERM (then exits 0); a vacancy prints nothing.

Exit codes: COMMAND's own; 3 no leader (--leader); 64 bad usage: a flag,
a URL, a NAME the backend cannot take; 69 lock service failed, or
unavailable (--leader); 71 cannot supervise COMMAND; 76 leadership lost
(without --again); 126 COMMAND not executable; 127 COMMAND not found;
128+n dlock interrupted by signal n while campaigning, or COMMAND killed
by signal n. COMMAND's own code passes through as it is.

Flags:
`

// ElectOptions are the parsed flags and arguments of "dlock elect".
type ElectOptions struct {
	Backend backend.Flags
	Name    string
	Command []string
	TTL     time.Duration
	Grace   time.Duration // after ParseElect, GraceFor(TTL) if not given
	Value   string
	Again   bool
	Leader  bool // print the leader and exit
	Observe bool // print each new leader until a signal
	Verbose bool

	graceGiven bool
}

// ElectFlagSet returns the flag set of "dlock elect", bound to o, with
// defaults.
func ElectFlagSet(o *ElectOptions) *flag.FlagSet {
	fs := cmdutil.NewFlagSet("dlock elect")
	o.Backend.Register(fs)
	o.TTL, o.Grace = DefaultTTL, unsetGrace
	fs.Var(durationFlag{d: &o.TTL}, "ttl", "lease time of the leadership, renewed every ttl/3 while COMMAND runs: how long it outlives a dlock that died (ZooKeeper: the session timeout)")
	fs.Var(durationFlag{d: &o.Grace}, "grace", "how long COMMAND has between SIGTERM and SIGKILL when it is stopped; at most ttl/3 (default 10s, or ttl/3 if less)")
	fs.StringVar(&o.Value, "value", "", "the value this process leads with, which --leader prints (default HOSTNAME:PID)")
	fs.BoolVar(&o.Again, "again", false, "after a lost leadership, campaign again and run COMMAND anew when leading, instead of exiting 76")
	fs.BoolVar(&o.Leader, "leader", false, "print the current leader's term and value and exit (3 if there is none); no COMMAND")
	fs.BoolVar(&o.Observe, "observe", false, "do not campaign: print the leader's term and value, and each new leader's, until SIGINT or SIGTERM; no COMMAND")
	fs.BoolVar(&o.Verbose, "v", false, "log lock events (waits, grants, renewals, losses) to stderr")
	return fs
}

// ParseElect parses the arguments of "dlock elect" (without "elect").
func ParseElect(args []string, getenv func(string) string) (ElectOptions, error) {
	var o ElectOptions
	fs := ElectFlagSet(&o)
	flagArgs, command := args, []string(nil)
	if i := slices.Index(args, "--"); i >= 0 {
		flagArgs, command = args[:i], args[i+1:]
	}
	pos, err := cmdutil.Parse(fs, flagArgs)
	if err != nil {
		return o, err
	}
	if command != nil {
		pos, command = nameAfterDashes(pos, command)
	}
	if command == nil && len(pos) > 1 && !o.Leader && !o.Observe {
		pos, command = pos[:1], pos[1:]
	}
	switch {
	case len(pos) == 0:
		return o, cmdutil.Usagef("dlock elect: missing election NAME; usage: dlock elect [flags] NAME -- COMMAND [ARGS...]")
	case len(pos) > 1:
		return o, cmdutil.Usagef("dlock elect: %d arguments before --, want only NAME (got %q); put COMMAND after --", len(pos), pos)
	case o.Leader && o.Observe:
		return o, cmdutil.Usagef("dlock elect: --leader prints the leader once, --observe every change: choose one")
	case o.Observe && command != nil:
		return o, cmdutil.Usagef("dlock elect: --observe prints the leaders and takes no COMMAND")
	case o.Observe && (o.Again || o.Value != ""):
		return o, cmdutil.Usagef("dlock elect: --observe does not campaign: --again and --value are for a campaign")
	case o.Leader && command != nil:
		return o, cmdutil.Usagef("dlock elect: --leader prints the leader and takes no COMMAND")
	case o.Leader && (o.Again || o.Value != ""):
		return o, cmdutil.Usagef("dlock elect: --leader does not campaign: --again and --value are for a campaign")
	case !o.Leader && !o.Observe && len(command) == 0:
		return o, cmdutil.Usagef("dlock elect: missing COMMAND; usage: dlock elect [flags] %s -- COMMAND [ARGS...]", cmdutil.Quote(pos[0]))
	}
	o.Name, o.Command = pos[0], command
	if o.graceGiven = o.Grace != unsetGrace; !o.graceGiven {
		o.Grace = GraceFor(o.TTL)
	}
	if o.Value == "" {
		host, _ := os.Hostname()
		o.Value = host + ":" + strconv.Itoa(os.Getpid())
	}
	switch {
	case o.TTL < MinTTL:
		return o, cmdutil.Usagef("dlock elect: --ttl %v is too short; use at least %v", o.TTL, MinTTL)
	case o.Grace > MaxGrace(o.TTL):
		return o, cmdutil.Usagef("dlock elect: --grace %v is more than a third of --ttl %v: COMMAND would be stopped whenever a renewal is slow; use --grace %v or less, or --ttl %v or more",
			o.Grace, o.TTL, cmdutil.Human(cmdutil.Down(MaxGrace(o.TTL))), cmdutil.Human(cmdutil.Up(3*o.Grace)))
	case o.Leader || o.Observe:
	case o.Command[0] == "":
		return o, cmdutil.Usagef("dlock elect: COMMAND is empty")
	case o.Command[0][0] == '-':
		return o, cmdutil.Usagef("dlock elect: COMMAND %q starts with a dash; put flags before NAME, and COMMAND after --", o.Command[0])
	}
	return o, nil
}

// ElectMain runs "dlock elect" with args (without "elect") and returns the
// exit code.
func ElectMain(args []string, io cmdutil.IO) int {
	o, err := ParseElect(args, io.Getenv)
	if errors.Is(err, cmdutil.ErrHelp) {
		cmdutil.PrintUsage(io.Out, ElectUsage, ElectFlagSet(new(ElectOptions)))
		return cmdutil.ExitOK
	}
	if err != nil {
		return cmdutil.Fail(io, err, cmdutil.ExitUsage)
	}
	spec, err := o.Backend.Resolve(io.Getenv)
	if err == nil {
		err = backend.CheckName(spec.Kind(), o.Name)
	}
	if err == nil {
		err = backend.CheckTTL(o.TTL)
	}
	for _, w := range spec.Warnings {
		fmt.Fprintln(io.Err, "dlock:", w)
	}
	if err != nil {
		return cmdutil.Fail(io, fmt.Errorf("dlock elect: %w", err), cmdutil.ExitUsage)
	}
	if !o.Leader && !o.Observe {
		// The connection keeps leases of this TTL valid (Redlock's node
		// timeout is TTL/20). --leader and --observe only read, as
		// inspect does: they get its longer node timeout, which a loaded
		// master needs (a 100ms one failed "reached 0 of 3 nodes").
		spec.LongestTTL = o.TTL
	}
	// A campaign waits as "dlock run --wait forever" does, for the
	// leadership and for a lock service that is unavailable.
	r := &runner{io: io, spec: spec, o: Options{Backend: o.Backend, Name: o.Name, Command: o.Command, TTL: o.TTL,
		Grace: o.Grace, Kind: backend.KindMutex, Verbose: o.Verbose, WaitForever: true, graceGiven: o.graceGiven}}
	return r.elect(o)
}

// elect connects, then campaigns and runs COMMAND while leading, again
// after each loss with --again. A campaign waits for a lock service that
// is unavailable, at the start too; --leader tries once.
func (r *runner) elect(o ElectOptions) int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	var obs dlock.Observer
	if r.o.Verbose {
		log := slog.New(slog.NewTextHandler(r.io.Err, &slog.HandlerOptions{Level: slog.LevelDebug}))
		obs = dlock.LogObserver(log)
		r.spec.Log = log
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type connected struct {
		t   *backend.Target
		err error
	}
	got := make(chan connected, 1)
	go func() {
		t, err := r.connect(ctx, ctx, obs, !o.Leader)
		got <- connected{t, err}
	}()
	var c connected
	select {
	case c = <-got:
	case sig := <-sigs:
		cancel()
		if c = <-got; c.t != nil {
			c.t.Close()
		}
		r.say("interrupted by %s while connecting to campaign in election %q", signame(sig), r.o.Name)
		return 128 + signum(sig)
	}
	if c.err != nil {
		return r.failed(acquired{err: c.err})
	}
	t := c.t
	defer t.Close()
	e, err := t.Election(r.o.Name, r.o.TTL)
	if err != nil {
		return r.failed(acquired{err: err})
	}
	if o.Leader {
		return r.printLeader(e)
	}
	if o.Observe {
		return r.observe(e, sigs)
	}
	r.target = t
	r.setGrace(t.LeaseTime(r.o.TTL))
	for {
		lease, code, ok := r.campaign(e, o.Value, sigs)
		if !ok {
			return code
		}
		if r.o.Verbose {
			r.say("leading election %q (term %d) as %q on %s", r.o.Name, lease.Fence(), o.Value, t.Describe())
		}
		r.stopped = false
		code = r.supervise(lease, sigs)
		if !r.stopped || !o.Again {
			return code
		}
		r.say("lost the leadership of %q; campaigning again (--again)", r.o.Name)
	}
}

// campaign campaigns until this process leads, a signal comes or the
// campaign fails; ok is false, with the exit code, if it did not lead.
func (r *runner) campaign(e dlock.Election, value string, sigs <-chan os.Signal) (lease dlock.Lease, code int, ok bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		lease dlock.Lease
		err   error
	}
	got := make(chan result, 1)
	start := time.Now()
	ctx = dlock.WithLabel(ctx, holderLabel(start)) // as dlock run labels its grants: inspect shows who leads
	go func() {
		l, err := e.Campaign(ctx, value)
		got <- result{l, err}
	}()
	select {
	case res := <-got:
		if res.err != nil {
			return nil, r.failed(acquired{err: res.err, waited: time.Since(start)}), false
		}
		return res.lease, 0, true
	case sig := <-sigs:
		cancel()
		if res := <-got; res.lease != nil {
			r.release(res.lease)
		}
		r.say("interrupted by %s while campaigning in election %q", signame(sig), r.o.Name)
		return nil, 128 + signum(sig), false
	}
}

// printLeader prints the election's leader.
func (r *runner) printLeader(e dlock.Election) int {
	ctx, cancel := context.WithTimeout(context.Background(), ConnectTimeout)
	defer cancel()
	l, err := e.Leader(ctx)
	switch {
	case errors.Is(err, dlock.ErrNoLeader):
		r.say("election %q has no leader", r.o.Name)
		return ExitNoLeader
	case err != nil:
		return r.failed(acquired{err: err})
	}
	fmt.Fprintf(r.io.Out, "%d %s\n", l.Term, cmdutil.Show(l.Value)) // as inspect shows a stored value
	return cmdutil.ExitOK
}

// observe prints the election's leader, if any, and then each new one,
// "TERM VALUE" a line, until a signal comes; it exits 0 then.
func (r *runner) observe(e dlock.Election, sigs <-chan os.Signal) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var last uint64
	show := func(l dlock.Leader) {
		if l.Term > last {
			last = l.Term
			fmt.Fprintf(r.io.Out, "%d %s\n", l.Term, cmdutil.Show(l.Value))
		}
	}
	ch := e.Observe(ctx)
	lctx, lcancel := context.WithTimeout(ctx, ConnectTimeout)
	l, err := e.Leader(lctx)
	lcancel()
	if err == nil {
		show(l)
	}
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				return cmdutil.ExitOK
			}
			show(l)
		case <-sigs:
			return cmdutil.ExitOK
		}
	}
}
