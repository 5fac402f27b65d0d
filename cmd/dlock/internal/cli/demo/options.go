// Package demo implements "dlock demo": it starts private servers, lets
// workers contend for locks through a node failure, and prints what
// happened: who held the lock, the fences, the hand-over times, the failure
// and the recovery.
package demo

import (
	"flag"
	"fmt"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// Defaults and limits of the flags.
const (
	DefaultWorkers = 4
	DefaultRounds  = 3
	MaxWorkers     = 64
	MaxRounds      = 100
)

// Usage is the help text of "dlock demo".
const Usage = `Usage: dlock demo [flags]

Starts private redis-server processes (and a ZooKeeper server, if one is
installed) on free ports in temporary directories, lets workers contend
for locks, and prints what happened:

  1. one Redis: who held the lock, fences, waits and hand-over times;
  2. a holder that stalls past its lease is told, and its stale fence is
     refused by the resource it writes to;
  3. Redlock over three nodes: one is killed (kill -9) and restarted
     empty, and the lock keeps working on the majority;
  4. ZooKeeper: first come, first served, and a holder cut off from the
     ensemble.

Every server is stopped and its directory removed when the demo ends,
also on Ctrl-C. It needs redis-server ('make demo' installs it);
ZooKeeper is optional (apt-get install zookeeper).

Exit codes: 0 done; 1 the demo failed or found a violation; 64 bad usage;
69 redis-server is not installed or a server did not start; 130 interrupted.

Flags:
`

// Options are the parsed flags of "dlock demo".
type Options struct {
	Workers int  // contending workers, each with its own connections
	Rounds  int  // times each worker takes the lock in each part
	NoZK    bool // skip ZooKeeper even if it is installed
}

// FlagSet returns the flag set of "dlock demo", bound to o, with defaults.
func FlagSet(o *Options) *flag.FlagSet {
	fs := cmdutil.NewFlagSet("dlock demo")
	fs.IntVar(&o.Workers, "workers", DefaultWorkers, fmt.Sprintf("contending workers, each with its own connections (1-%d)", MaxWorkers))
	fs.IntVar(&o.Rounds, "rounds", DefaultRounds, fmt.Sprintf("times each worker takes the lock in each part of the demo (1-%d)", MaxRounds))
	fs.BoolVar(&o.NoZK, "no-zk", false, "skip the ZooKeeper part even if ZooKeeper is installed")
	return fs
}

// Parse parses the arguments of "dlock demo" (without "demo").
func Parse(args []string) (Options, error) {
	var o Options
	pos, err := cmdutil.Parse(FlagSet(&o), args)
	if err != nil {
		return o, err
	}
	switch {
	case len(pos) > 0:
		return o, cmdutil.Usagef("dlock demo: takes no arguments, got %q; run 'dlock demo --help' for the flags", pos)
	case o.Workers < 1 || o.Workers > MaxWorkers:
		return o, cmdutil.Usagef("dlock demo: --workers %d is out of range; use 1 to %d", o.Workers, MaxWorkers)
	case o.Rounds < 1 || o.Rounds > MaxRounds:
		return o, cmdutil.Usagef("dlock demo: --rounds %d is out of range; use 1 to %d", o.Rounds, MaxRounds)
	}
	return o, nil
}
