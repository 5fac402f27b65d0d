// Package bench implements "dlock bench": measure the latency and
// throughput of dlock's locks on a user's deployment, and check mutual
// exclusion while doing so.
package bench

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/backend"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// Defaults and limits of the flags. S2's goroutines, S3's clients and hold
// time are those of the repository's bench/ harness.
const (
	DefaultDuration   = 5 * time.Second
	DefaultClients    = 8
	DefaultGoroutines = 64
	DefaultHold       = 50 * time.Microsecond
	DefaultTTL        = 10 * time.Second

	MinDuration   = 10 * time.Millisecond
	MinTTL        = 100 * time.Millisecond // as "dlock run": renewal runs every TTL/3
	MinClients    = 2                      // contention needs two
	MaxClients    = 1000                   // each is a connection (a session on ZooKeeper)
	MaxGoroutines = 10000
	MaxPermits    = 1000000

	// PrefixBase starts the default --prefix, which ends in random hex.
	PrefixBase = "dlock-bench-"
)

// Scenarios lists the scenarios in the order they run.
var Scenarios = []string{"S1", "S2", "S3", "S4"}

// Output formats of -o.
const (
	FormatTable = "table"
	FormatJSON  = "json"
)

// Usage is the help text of "dlock bench".
const Usage = `Usage: dlock bench [flags]

Measures dlock's locks on the deployment that --redis or --zk names: how
long a lock and release take, how many a second it sustains, and how fast
a contended lock passes from one holder to the next. It checks mutual
exclusion as it goes. Every lock it takes is named under --prefix, by
default dlock-bench-<random hex>, so a run never touches a real lock.
Latencies are measured in this process from call to return, network
included; nothing is estimated.

Scenarios (numbered after the repository's bench/ harness):
  S1  uncontended: one goroutine takes and releases its own lock, cycle
      after cycle (TryLock + Release); latency: one cycle.
  S2  throughput: --goroutines goroutines share one connection, each
      cycling on its own lock; latency: one cycle.
  S3  contention: --clients independent connections (ZooKeeper: sessions)
      take one lock with a blocking Lock, hold it for --hold of busy work
      and release it; latency: the hand-over, from a holder's Release
      call to the next holder's Lock returning. For --kind read and
      semaphore, which admit several holders: the wait in Lock.
  S4  nodes: S1 through each server of the deployment alone (each Redis
      master, each ZooKeeper server), --duration shared between them.
      Set against S1 it shows what the quorum costs and whether one node
      is slow or failing; a node that cannot be reached is reported in
      its row. With a single Redis it repeats S1 on that one server.

How they map to bench/: S1-S3 are its S1-S3, except that each worker
reuses one lock name instead of a fresh name per cycle (every name keeps
its fence counter), S3 reports the hand-over from the Release call (bench's
robust variant) for changes of holder only, and there is no raw-Redis floor
or server-side command count. bench's S4 is Redlock on 5 nodes it starts
itself, flushed, pre-aged and timed through a wrapper, with latency
injected by proxies in its diagnostics; none of that is possible on a
deployment, so here S1 and S2 measure Redlock when --redis is given 3 or
more times, and S4 measures each node alone instead.

Mutual exclusion is checked in S3: a second holder at once (more than
--permits for a semaphore) counts as an overlap, and a fence that does not
increase as an error; --kind read is not checked. Lock errors are counted
and the first few shown.

On Redis and on Redlock nodes the run leaves no key of its lock names
behind once their TTL has passed: fences come from one counter per Cluster
slot (dlock:fence:{TAG}, at most 16384 per server), which stay.
ZooKeeper removes the empty container nodes itself. The nodes of a new
Redlock deployment vote one TTL after their first use: bench waits for that
before S1.

Exit codes: 0 done; 1 mutual exclusion was violated; 64 bad usage; 69 lock
service unavailable, or a scenario completed no lock at all; 130 interrupted
(the results so far are printed).

Flags:
`

// Options are the parsed flags of "dlock bench".
type Options struct {
	Backend    backend.Flags
	Scenarios  []string // a subset of Scenarios, in their order
	Duration   time.Duration
	Clients    int
	Goroutines int
	Hold       time.Duration
	Kind       string
	Permits    int
	TTL        time.Duration
	Format     string
	Chart      string // SVG file, or "" for none
	Prefix     string
}

// FlagSet returns the flag set of "dlock bench", bound to o, with defaults.
func FlagSet(o *Options) *flag.FlagSet {
	fs := cmdutil.NewFlagSet("dlock bench")
	o.Backend.Register(fs)
	o.Backend.RegisterSession(fs)
	o.Scenarios = slices.Clone(Scenarios)
	o.Duration, o.Clients, o.Goroutines, o.Hold = DefaultDuration, DefaultClients, DefaultGoroutines, DefaultHold
	o.Kind, o.TTL, o.Format = backend.KindMutex, DefaultTTL, FormatTable
	fs.Var(cmdutil.ListFlag{List: &o.Scenarios, Choices: Scenarios, Item: "scenario", Upper: true}, "scenarios", "scenarios to run, comma-separated (default S1,S2,S3,S4)")
	fs.Var(cmdutil.DurationFlag{D: &o.Duration, Min: MinDuration}, "duration", "how long each scenario runs (default 5s)")
	fs.Var(cmdutil.IntFlag{N: &o.Clients, Min: MinClients, Max: MaxClients}, "clients", fmt.Sprintf("S3: independent clients contending for one lock (default %d)", DefaultClients))
	fs.Var(cmdutil.IntFlag{N: &o.Goroutines, Min: 1, Max: MaxGoroutines}, "goroutines", fmt.Sprintf("S2: goroutines sharing one connection (default %d)", DefaultGoroutines))
	fs.Var(cmdutil.DurationFlag{D: &o.Hold}, "hold", "S3: busy work while holding the lock (default 50µs)")
	fs.Var(cmdutil.ChoiceFlag{S: &o.Kind, Values: backend.Kinds}, "kind", "lock kind: "+strings.Join(backend.Kinds, ", ")+" (default mutex)")
	fs.Var(cmdutil.IntFlag{N: &o.Permits, Min: 1, Max: MaxPermits}, "permits", "number of holders a --kind semaphore admits")
	fs.Var(cmdutil.DurationFlag{D: &o.TTL, Min: MinTTL}, "ttl", "lease time of every lock, renewed while held (default 10s)")
	fs.Var(cmdutil.ChoiceFlag{S: &o.Format, Values: []string{FormatTable, FormatJSON}}, "o", "output format: table or json (default table)")
	fs.StringVar(&o.Chart, "chart", "", "also write an SVG chart of the latency percentiles to this file, such as bench.svg")
	fs.StringVar(&o.Prefix, "prefix", "", "start of every lock name the run uses (default "+PrefixBase+"<random hex>)")
	return fs
}

// Parse parses the arguments of "dlock bench" (without "bench").
func Parse(args []string) (Options, error) {
	var o Options
	fs := FlagSet(&o)
	pos, err := cmdutil.Parse(fs, args)
	if err != nil {
		return o, err
	}
	if len(pos) > 0 {
		return o, cmdutil.Usagef("dlock bench: takes no arguments, got %q; give everything as flags (run 'dlock bench --help')", pos)
	}
	prefixSet := false
	fs.Visit(func(f *flag.Flag) { prefixSet = prefixSet || f.Name == "prefix" })
	if !prefixSet {
		o.Prefix = randomPrefix()
	}
	return o, o.check(prefixSet)
}

func (o *Options) check(prefixSet bool) error {
	switch {
	case prefixSet && strings.TrimSpace(o.Prefix) == "":
		return cmdutil.Usagef("dlock bench: --prefix is empty; give a name no real lock uses, such as %sa", PrefixBase)
	case o.Kind == backend.KindSemaphore && o.Permits == 0:
		return cmdutil.Usagef("dlock bench: --kind semaphore needs --permits N, with N >= 1")
	case o.Kind != backend.KindSemaphore && o.Permits != 0:
		return cmdutil.Usagef("dlock bench: --permits is only for --kind semaphore")
	case o.Hold*2 >= o.TTL:
		return cmdutil.Usagef("dlock bench: --hold %v is not well below --ttl %v; use a --hold under half the TTL", o.Hold, o.TTL)
	case o.Chart != "" && !strings.EqualFold(filepath.Ext(o.Chart), ".svg"):
		return cmdutil.Usagef("dlock bench: --chart %q: the chart is SVG; give a file name ending in .svg", o.Chart)
	}
	return nil
}

// randomPrefix returns PrefixBase and 8 random hex digits.
func randomPrefix() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return PrefixBase + hex.EncodeToString(b[:])
}

// name returns the lock name of one part of a scenario.
func (o *Options) name(parts ...string) string {
	return o.Prefix + "/" + strings.Join(parts, "/")
}

// exclusive reports whether the kind admits one holder at a time.
func exclusive(kind string) bool { return kind != backend.KindRead && kind != backend.KindSemaphore }
