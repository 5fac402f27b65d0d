// Package run implements "dlock run": run a command while holding a lock,
// and stop it if the lock is lost.
package run

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/internal/cli/backend"
	"github.com/dlock-go/dlock/internal/cli/cmdutil"
)

// Defaults of the flags.
const (
	DefaultTTL   = 30 * time.Second
	DefaultGrace = 10 * time.Second
	// MinTTL is the shortest --ttl: the watchdog renews every TTL/3, and
	// below this one slow round trip costs the lock.
	MinTTL = 100 * time.Millisecond
)

// Usage is the help text of "dlock run".
const Usage = `Usage: dlock run [flags] NAME -- COMMAND [ARGS...]

Runs COMMAND while holding the lock NAME, renewing it as long as COMMAND
runs, and releases it when COMMAND exits. COMMAND gets DLOCK_NAME,
DLOCK_TOKEN and DLOCK_FENCE in its environment; its exit code is dlock's.
If the lock is lost while COMMAND runs, its process group gets SIGTERM,
then SIGKILL after --grace, and dlock exits with 76.

Exit codes: COMMAND's own; 64 bad usage; 69 lock service unavailable;
71 cannot listen on --metrics-addr; 75 lock held by another (see
--conflict-exit-code); 76 lock lost; 126 COMMAND not executable;
127 COMMAND not found; 128+n COMMAND killed by signal n.

Flags:
`

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
	Grace        time.Duration
	MetricsAddr  string
	Verbose      bool
}

// durationFlag is a flag.Value for a non-negative duration, with a message
// that shows the expected form.
type durationFlag struct {
	d       *time.Duration
	forever *bool // if not nil, "forever" is accepted
}

func (f durationFlag) String() string {
	if f.d == nil {
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
	o.TTL, o.Grace, o.Kind, o.ConflictExit = DefaultTTL, DefaultGrace, backend.KindMutex, cmdutil.ExitConflict
	fs.Var(durationFlag{d: &o.TTL}, "ttl", "lease time, renewed every ttl/3 while COMMAND runs (default 30s)")
	fs.Var(durationFlag{d: &o.Wait, forever: &o.WaitForever}, "wait", "how long to wait for the lock: 0 fails at once, a duration such as 5m, or forever (default 0)")
	fs.StringVar(&o.Kind, "kind", o.Kind, "lock kind: "+strings.Join(backend.Kinds, ", "))
	fs.IntVar(&o.Permits, "permits", 0, "number of holders a --kind semaphore admits")
	fs.IntVar(&o.ConflictExit, "conflict-exit-code", o.ConflictExit, "exit code when the lock is held by another (1-255)")
	fs.Var(durationFlag{d: &o.Grace}, "grace", "after the lock is lost, how long COMMAND has between SIGTERM and SIGKILL (default 10s)")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address (such as 127.0.0.1:9464) at /metrics while COMMAND runs")
	fs.BoolVar(&o.Verbose, "v", false, "log lock events (waits, grants, renewals, losses) to stderr")
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
	case len(command) == 0:
		return o, cmdutil.Usagef("dlock run: missing COMMAND; usage: dlock run [flags] %s -- COMMAND [ARGS...]", pos[0])
	}
	o.Name, o.Command = pos[0], command
	return o, o.check()
}

func (o *Options) check() error {
	switch {
	case o.TTL < MinTTL:
		return cmdutil.Usagef("dlock run: --ttl %v is too short; use at least %v", o.TTL, MinTTL)
	case !slices.Contains(backend.Kinds, o.Kind):
		return cmdutil.Usagef("dlock run: --kind %q is not one of %s", o.Kind, strings.Join(backend.Kinds, ", "))
	case o.Kind == backend.KindSemaphore && o.Permits < 1:
		return cmdutil.Usagef("dlock run: --kind semaphore needs --permits N, with N >= 1")
	case o.Kind != backend.KindSemaphore && o.Permits != 0:
		return cmdutil.Usagef("dlock run: --permits is only for --kind semaphore")
	case o.ConflictExit < 1 || o.ConflictExit > 255:
		return cmdutil.Usagef("dlock run: --conflict-exit-code %d is out of range; use 1 to 255", o.ConflictExit)
	case o.Command[0] == "":
		return cmdutil.Usagef("dlock run: COMMAND is empty")
	case strings.HasPrefix(o.Command[0], "-"):
		return cmdutil.Usagef("dlock run: COMMAND %q starts with a dash; put flags before NAME, and COMMAND after --", o.Command[0])
	}
	return nil
}
