package run

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/backend"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// Defaults and limits of the flags.
const (
	DefaultTTL = 30 * time.Second
	// DefaultGrace is --grace when it is not given, unless ttl/3 is less:
	// see GraceFor.
	DefaultGrace = 10 * time.Second
	// MinTTL is the shortest --ttl: the watchdog renews every TTL/3, and
	// below this one slow round trip costs the lock.
	MinTTL = 100 * time.Millisecond
)

// GraceFor returns the --grace used with ttl when none is given:
// DefaultGrace, or ttl/3 if that is less.
func GraceFor(ttl time.Duration) time.Duration { return min(DefaultGrace, ttl/3) }

// MaxGrace returns the longest --grace allowed with ttl: a third of it.
// A lease not renewed by grace + KillLead(ttl) before its end stops
// COMMAND, and renewals go out every ttl/3: with this grace, a renewal
// still has about a quarter of the ttl to answer (ttl/3 - KillLead -
// dlock.Drift) before COMMAND is stopped.
func MaxGrace(ttl time.Duration) time.Duration { return ttl / 3 }

// KillLead returns how long before the end of a lease that could not be
// renewed COMMAND gets SIGKILL: ttl/20, the time the kill has to take
// effect before another owner can take the lock.
func KillLead(ttl time.Duration) time.Duration { return ttl / 20 }

// Usage is the help text of "dlock run": one screen (at most 50 lines).
// DetailsUsage and the full flag list (FlagsUsage) hold the rest.
const Usage = `Usage: dlock run [flags] NAME [-- COMMAND [ARGS...]]
       dlock run [flags] -- NAME [-- COMMAND [ARGS...]]  (NAME starting with -)

Runs COMMAND while holding the lock NAME, renewing it every ttl/3, and
releases it when COMMAND and every process it started have exited.
COMMAND gets DLOCK_NAME, DLOCK_TOKEN and DLOCK_FENCE in its environment;
its exit code is dlock's. Without COMMAND, dlock holds the lock until
SIGINT or SIGTERM, then releases it and exits 0. If the lock is lost, or
cannot be renewed in time, every process of COMMAND's gets SIGTERM, then
SIGKILL, so that it is gone before another owner can take the lock.

The lock service: --redis URL (3 or more: Redlock), --redis-cluster,
--redis-sentinel, --zk, --postgres, --mysql or --etcd, or DLOCK_* (see
'dlock help').

Common flags:
  --ttl D                 lease time, renewed every ttl/3 (default 30s)
  --wait D                wait this long for the lock and for the service;
                          0 (the default) tries once; or forever
  --kind K                mutex (default), fair, read, write, or semaphore
                          with --permits N
  --once-per D            skip COMMAND, exit 0, if its last successful run
                          finished less than D ago
  --max-hold D            hold at most D: COMMAND is stopped, exit 79
  --grace D               SIGTERM to SIGKILL, when the lock is lost
  --conflict-exit-code N  exit N, not 75, when another owner holds the lock
  --leave-children        release when COMMAND exits, not its children
  -v                      log lock events (waits, grants, losses) to stderr
  --metrics-addr ADDR     serve Prometheus metrics while COMMAND runs

Exit codes: COMMAND's own; 64 bad usage; 69 lock service unavailable
(when --wait ends) or failed; 71 cannot supervise COMMAND or listen on
--metrics-addr; 75 held by another owner; 76 lock lost, or not renewed
in time; 79 stopped at --max-hold; 126 COMMAND not executable; 127 not
found; 128+n killed by signal n.

More: 'dlock help run-flags' lists every flag (TLS, --session, --table,
metrics, logs, ...); 'dlock help run-details' explains supervision,
--max-hold, --once-per, waiting, metrics and every exit code.
`

// DetailsUsage is the help text of "dlock help run-details".
const DetailsUsage = `dlock run: the details (see 'dlock help run' for a summary)

Runs COMMAND while holding the lock NAME, renewing it every ttl/3, and
releases it when COMMAND and every process it started have exited: like
flock(1), "sh -c 'worker & exit 0'" holds the lock until worker exits
(--leave-children releases it when COMMAND itself exits). COMMAND gets
DLOCK_NAME, DLOCK_TOKEN and DLOCK_FENCE in its environment; its exit code
is dlock's. Without COMMAND, dlock holds the lock until SIGINT or SIGTERM,
then releases it and exits 0 (as "etcdctl lock NAME" does).

Every process COMMAND starts stays supervised, daemons included. If the
lock is lost, they all get SIGTERM, then SIGKILL after --grace, and dlock
exits with 76 once none is left. If the lock cannot be renewed, the same
stop starts early, SIGTERM --grace + ttl/20 before the lock ends and
SIGKILL ttl/20 before, so that COMMAND is gone before another owner can
take the lock. The price: renewals failing for about ttl - grace stop
COMMAND, even if a later one would have got through. With --max-hold D,
the lock is not renewed past D after it was granted: COMMAND gets the same
early stop, so as to be gone by then, and dlock exits 79. With
--once-per D, dlock skips COMMAND and exits 0 if the last run of NAME that
exited 0 finished less than D ago (checked while holding the lock, and
recorded before releasing it; "dlock release --force NAME" removes the
record). If dlock itself dies (kill -9, the OOM
killer), everything of COMMAND's is killed at once, and the lock outlives
it by --ttl (on ZooKeeper the session timeout: --ttl, within the
ensemble's minSessionTimeout and maxSessionTimeout).

While it waits, dlock shows who holds the lock, its time left, the
waiters and the time waited: on a terminal a status line redrawn in
place; otherwise a line when the wait starts and one every 30s
(DLOCK_WAIT_REPORT_EVERY sets another interval).

--wait D counts from dlock's start and covers the lock service too: a
service that refuses connections, does not answer, restarts or fails over
is waited for, at connect time as well, and dlock exits 69 only if D ends
with it still unavailable, naming its servers and since when. Without
--wait, dlock tries once: 69 at once if the service is unavailable, 75 if
another owner holds the lock.

Metrics and logs: --metrics-addr serves Prometheus metrics while COMMAND
runs; for a job that ends before any scrape, --metrics-push sends them to
a Pushgateway and --metrics-textfile writes them (atomically) for
node_exporter's textfile collector, when the lock is granted, when it is
lost and at exit. --log-format json makes the -v log and the messages of
a running dlock (not errors in its flags) JSON objects, one a line, with
the fields time, level, msg, lock, kind (the --kind words), fence, wait
and held (in seconds). See docs/observability-ops.md.

Exit codes: COMMAND's own; 64 bad usage: a flag, a URL, a --metrics-push
URL or --metrics-textfile PATH dlock cannot use, a password the server
refuses, a NAME the backend cannot take, --permits other than the
size of the semaphore in use, or a name held by another kind of lock
(another --kind); 69 lock service unavailable (when --wait ends) or
failed, and nothing else; 71 cannot listen on --metrics-addr, or cannot
supervise COMMAND; 75 lock held by another (see --conflict-exit-code); 76
lock lost, or COMMAND stopped because the lock could not be renewed; 79
COMMAND stopped at --max-hold; without COMMAND, 0 once a signal released
the lock, 76 lost, 79 at --max-hold; 126 COMMAND not executable; 127 COMMAND not
found; 128+n COMMAND killed by signal n. COMMAND's own code passes through
as it is: a COMMAND that exits 75 or 76 itself cannot be told from a
conflict or a lost lock, so check stderr, or give --conflict-exit-code a
code COMMAND never uses (dlock's own codes are refused).
`

// FlagsUsage heads the help text of "dlock help run-flags", which lists
// every flag of dlock run.
const FlagsUsage = `dlock run: every flag (see 'dlock help run' for a summary)

Flags:
`

// PrintFlags writes the help of "dlock help run-flags": every flag of
// dlock run.
func PrintFlags(w io.Writer) { cmdutil.PrintUsage(w, FlagsUsage, FlagSet(new(Options))) }

// PrintDetails writes the help of "dlock help run-details".
func PrintDetails(w io.Writer) { fmt.Fprint(w, DetailsUsage) }

// ownExitCodes are the exit codes with which dlock run reports something
// of its own, which --conflict-exit-code may not take: a conflict would
// read as, say, a lost lock.
var ownExitCodes = []int{cmdutil.ExitUsage, cmdutil.ExitUnavailable, cmdutil.ExitOSErr, cmdutil.ExitLost, cmdutil.ExitMaxHold, cmdutil.ExitCannotExec, cmdutil.ExitNotFound}

// Options are the parsed flags and arguments of "dlock run".
type Options struct {
	Backend      backend.Flags
	Name         string
	Command      []string
	TTL          time.Duration
	Wait         time.Duration // 0: one attempt
	WaitForever  bool
	Kind         string
	Permits      int
	ConflictExit int
	Grace        time.Duration // after Parse, GraceFor(TTL) if not given
	// MaxHold caps how long the lock is held (WithMaxHold); 0: no cap.
	MaxHold time.Duration
	// OncePer skips COMMAND if the last successful run of NAME finished
	// less than this long ago; 0: always run.
	OncePer time.Duration
	// LeaveChildren releases the lock when COMMAND's own process exits,
	// leaving what it started running, unsupervised.
	LeaveChildren bool
	MetricsAddr   string
	Verbose       bool
	// MetricsPush, MetricsTextfile and LogFormat: see metrics_push.go
	// and logformat.go.
	MetricsPush, MetricsTextfile, LogFormat string

	graceGiven bool // --grace was given
}

// unsetGrace marks --grace as not given.
const unsetGrace = -1

// durationFlag is a flag.Value for a non-negative duration, with a message
// that shows the expected form.
type durationFlag struct {
	d       *time.Duration
	forever *bool // if not nil, "forever" is accepted
}

func (f durationFlag) String() string {
	if f.d == nil || *f.d < 0 { // not set: the usage names the default
		return ""
	}
	if f.forever != nil && *f.forever {
		return "forever"
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	if f.forever != nil && s == "forever" {
		*f.forever = true
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		// A bare number is a common slip: say which unit to add.
		if _, e := strconv.ParseFloat(s, 64); e == nil {
			return fmt.Errorf("a duration needs a unit, such as %ss", s)
		}
		if f.forever != nil {
			return fmt.Errorf("want a duration such as 10s or 2m, or forever")
		}
		return fmt.Errorf("want a duration such as 10s or 2m")
	}
	if d < 0 {
		return fmt.Errorf("a duration cannot be negative")
	}
	*f.d = d
	if f.forever != nil {
		*f.forever = false
	}
	return nil
}

// FlagSet returns the flag set of "dlock run", bound to o, with defaults.
func FlagSet(o *Options) *flag.FlagSet {
	fs := cmdutil.NewFlagSet("dlock run")
	o.Backend.Register(fs)
	o.Backend.RegisterSession(fs)
	o.TTL, o.Grace, o.Kind, o.ConflictExit = DefaultTTL, unsetGrace, backend.KindMutex, cmdutil.ExitConflict
	fs.Var(durationFlag{d: &o.TTL}, "ttl", "lease time, renewed every ttl/3 while COMMAND runs: how long the lock outlives a dlock that died (ZooKeeper: the session timeout)")
	fs.Var(durationFlag{d: &o.Wait, forever: &o.WaitForever}, "wait", "how long to wait for the lock, and for a lock service that is unavailable, from the start: 0 tries once, a duration such as 5m, or forever")
	fs.StringVar(&o.Kind, "kind", o.Kind, "lock kind: "+strings.Join(backend.Kinds, ", "))
	fs.IntVar(&o.Permits, "permits", 0, "number of holders a --kind semaphore admits; must match the size of a semaphore in use")
	fs.IntVar(&o.ConflictExit, "conflict-exit-code", o.ConflictExit, "exit code when the lock is held by another (1-255, except dlock's own: 64 69 71 76 79 126 127)")
	fs.Var(durationFlag{d: &o.Grace}, "grace", "how long COMMAND has between SIGTERM and SIGKILL when it is stopped; at most ttl/3 (default 10s, or ttl/3 if less)")
	fs.Var(durationFlag{d: &o.MaxHold}, "max-hold", "the longest COMMAND may hold the lock: it gets SIGTERM --grace + ttl/20 before this cap (without --grace, the grace is at most a third of it: --max-hold 3s gets SIGTERM after 3s - 1s - ttl/20), SIGKILL ttl/20 before, and dlock exits 79 (default 0: no cap)")
	fs.Var(durationFlag{d: &o.OncePer}, "once-per", "run COMMAND at most once per this long: skip it, exiting 0, if the last run of NAME that exited 0 finished less than this long ago (every backend; the record is kept on the lock service)")
	fs.BoolVar(&o.LeaveChildren, "leave-children", false, "release the lock when COMMAND's own process exits, and leave the processes it started running, no longer supervised (as flock -o)")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address (such as 127.0.0.1:9464) at /metrics while COMMAND runs")
	fs.BoolVar(&o.Verbose, "v", false, "log lock events (waits, grants, renewals, losses) to stderr")
	registerOps(fs, o)
	return fs
}

// Parse parses the arguments of "dlock run" (without "run").
func Parse(args []string, getenv func(string) string) (Options, error) {
	var o Options
	fs := FlagSet(&o)
	// Flags may come before or after NAME; "--" starts COMMAND. Without
	// "--", COMMAND is whatever follows NAME.
	flagArgs, command := args, []string(nil)
	if i := slices.Index(args, "--"); i >= 0 {
		flagArgs, command = args[:i], args[i+1:]
	}
	var pos []string
	if command != nil {
		var err error
		if pos, err = cmdutil.Parse(fs, flagArgs); err != nil {
			return o, err
		}
		pos, command = nameAfterDashes(pos, command)
	} else {
		if err := cmdutil.ParseFlags(fs, flagArgs); err != nil {
			return o, err
		}
		pos = fs.Args()
		if len(pos) > 1 {
			pos, command = pos[:1], pos[1:]
		}
	}
	switch {
	case len(pos) == 0:
		return o, cmdutil.Usagef("dlock run: missing lock NAME; usage: dlock run [flags] NAME -- COMMAND [ARGS...]")
	case len(pos) > 1:
		return o, cmdutil.Usagef("dlock run: %d arguments before --, want only NAME (got %q); put COMMAND after --", len(pos), pos)
	case command != nil && len(command) == 0:
		return o, cmdutil.Usagef("dlock run: missing COMMAND after --; usage: dlock run [flags] %s [-- COMMAND [ARGS...]]", cmdutil.Quote(pos[0]))
	}
	o.Name, o.Command = pos[0], command
	return o, o.check()
}

// nameAfterDashes reads "-- NAME [-- COMMAND...]" when no NAME came
// before the first "--" (pos is empty): a NAME that starts with a dash
// can only be given so. rest is what follows the first "--".
func nameAfterDashes(pos, rest []string) (_, command []string) {
	if len(pos) > 0 || len(rest) == 0 {
		return pos, rest
	}
	if len(rest) == 1 {
		return rest, nil
	}
	if rest[1] == "--" {
		return rest[:1], rest[2:]
	}
	return pos, rest
}

func (o *Options) check() error {
	if o.graceGiven = o.Grace != unsetGrace; !o.graceGiven {
		o.Grace = GraceFor(o.TTL)
		if o.MaxHold > 0 {
			o.Grace = min(o.Grace, o.MaxHold/3)
		}
	}
	switch {
	case o.TTL < MinTTL:
		return cmdutil.Usagef("dlock run: --ttl %v is too short; use at least %v", o.TTL, MinTTL)
	case o.Grace > MaxGrace(o.TTL):
		return cmdutil.Usagef("dlock run: --grace %v is more than a third of --ttl %v: COMMAND would be stopped whenever a renewal is slow; use --grace %v or less, or --ttl %v or more",
			o.Grace, o.TTL, cmdutil.Human(cmdutil.Down(MaxGrace(o.TTL))), cmdutil.Human(cmdutil.Up(3*o.Grace)))
	case o.MaxHold > 0 && o.MaxHold <= o.Grace+KillLead(o.TTL):
		shorter := "a shorter --ttl (ttl/20 is " + cmdutil.Human(KillLead(o.TTL)) + ")"
		if o.graceGiven {
			shorter = "a shorter --grace or --ttl"
		}
		// The least cap that leaves COMMAND any time, which does not
		// depend on the cap given: above grace + ttl/20; without
		// --grace, whose default is then a third of the cap, above
		// 1.5·ttl/20 (M > M/3 + ttl/20).
		least, shownGrace := o.Grace+KillLead(o.TTL), o.Grace.String() // as given
		if !o.graceGiven {
			shownGrace = cmdutil.Human(o.Grace) // a third of the cap: 333.333333ms
			least = KillLead(o.TTL) * 3 / 2
		}
		return cmdutil.Usagef("dlock run: --max-hold %v leaves COMMAND no time: it gets SIGTERM --grace %v + ttl/20 before the cap; use --max-hold %v or more, or %s",
			o.MaxHold, shownGrace, cmdutil.Human(above(least)), shorter)
	case o.OncePer > 0 && o.OncePer < time.Millisecond:
		return cmdutil.Usagef("dlock run: --once-per %v is too short; use at least 1ms", o.OncePer)
	case !slices.Contains(backend.Kinds, o.Kind):
		return cmdutil.Usagef("dlock run: --kind %q is not one of %s", o.Kind, strings.Join(backend.Kinds, ", "))
	case o.Kind == backend.KindSemaphore && o.Permits < 1:
		return cmdutil.Usagef("dlock run: --kind semaphore needs --permits N, with N >= 1")
	case o.Kind != backend.KindSemaphore && o.Permits != 0:
		return cmdutil.Usagef("dlock run: --permits is only for --kind semaphore")
	case o.ConflictExit < 1 || o.ConflictExit > 255:
		return cmdutil.Usagef("dlock run: --conflict-exit-code %d is out of range; use 1 to 255", o.ConflictExit)
	case slices.Contains(ownExitCodes, o.ConflictExit):
		return cmdutil.Usagef("dlock run: --conflict-exit-code %d is one of dlock's own exit codes (%s); pick another, such as 75 (the default) or 3",
			o.ConflictExit, strings.Trim(fmt.Sprint(ownExitCodes), "[]"))
	case len(o.Command) == 0 && o.OncePer > 0:
		return cmdutil.Usagef("dlock run: --once-per needs a COMMAND: without one, dlock holds the lock until a signal, and records no run")
	case len(o.Command) == 0 && o.LeaveChildren:
		return cmdutil.Usagef("dlock run: --leave-children needs a COMMAND")
	case len(o.Command) == 0:
	case o.Command[0] == "":
		return cmdutil.Usagef("dlock run: COMMAND is empty")
	case strings.HasPrefix(o.Command[0], "-"):
		return cmdutil.Usagef("dlock run: COMMAND %q starts with a dash; put flags before NAME, and COMMAND after --", o.Command[0])
	}
	return nil
}

// above returns the round duration a person would pick just above d: the
// next whole 100ms from a second up, the next whole millisecond below.
func above(d time.Duration) time.Duration {
	unit := time.Millisecond
	if d >= time.Second {
		unit = 100 * time.Millisecond
	}
	return (d/unit + 1) * unit
}
