// Package chaos implements "dlock chaos": run the fault-injection harness
// (package chaos) against local servers it starts, and report the verdict.
package chaos

import (
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/chaos"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// Defaults of the flags that differ from the harness's own.
const DefaultDuration = 30 * time.Second

// Output formats of -o.
const (
	FormatTable = "table"
	FormatJSON  = "json"
)

// Usage is the help text of "dlock chaos".
const Usage = `Usage: dlock chaos [flags]

Starts local servers for each --backend on loopback ports, runs --clients
client processes that contend for one lock, each through a TCP proxy of
its own, and injects real faults for --duration. Every client loops: take
the lock, read a shared set, work, write the set back with one more
element, write a fenced register with its fence, release. Afterwards the
history of every operation is checked for:

  lease overlaps     two clients holding valid leases at once
  section overlaps   two clients in their critical sections at once
  stale writes       the fenced register accepting a superseded holder's write
  fence regressions  a grant whose fence is not above every earlier one
  lost updates       acknowledged additions missing from the set
  lock failed        a Lock call that failed instead of waiting through
                     the fault (every fault heals)
  not linearizable   the clients' calls to the fenced register, checked
                     with porcupine against a model of the register: a
                     write reported accepted that a later read misses, a
                     refused write that one sees

and each violation is put down to the fault in force. For each kind of
fault the report gives the time from its start and from its end to the
next grant (median, 99th percentile, longest) and the Lock calls that
failed in its window. Some violations are physical
limits, documented in docs/SAFETY.md: a client paused past its TTL is
still in its critical section when the next holder enters (only its
fence stops its writes); a single Redis that restarts without its data,
or whose key expires early, hands the lock out twice. A stale write
accepted or a fence regression is never within the limits.

Backends: redis (one server, no persistence), redis-aof (appendfsync
always), redlock3, redlock5 (Redlock over 3 or 5 servers), redlock3-rdb
(Redlock over 3 servers that save an RDB snapshot every second: kill
restarts one from its last snapshot), zk3 (a ZooKeeper ensemble of 3),
etcd3 (an etcd cluster of 3; etcdlock), postgres (one PostgreSQL server, pglock's lease mode), postgres-session
(pglock's session mode, with an advisory lock), mariadb (one MariaDB
server, mysqllock's lease mode), mariadb-session (mysqllock's session
mode, with GET_LOCK), sentinel (a master, two
replicas and three Sentinels; redislock through go-redis's failover
client), sentinel-replicas (the same, with WithReplicas(1, TTL/10)),
cluster (a Redis Cluster of 3 masters with a replica each; redislock
through go-redis's cluster client), cluster-replicas (the same, with
WithReplicas(1, TTL/10)), or all.

Faults: kill, kill-empty (restart without data), pause (SIGSTOP a
server), latency, blackhole, reset (connections), expire (the lock key,
early: a clock jump; Redis; on Redlock reported as expire-bare when the
holder's key stood on no more than a majority of the nodes), client-pause (SIGSTOP the holder past its
TTL), partition (cut the holder off; Redis, PostgreSQL, MariaDB, etcd),
leader-kill (ZooKeeper, etcd), session-expiry and kill-empty-all (every
member restarted without data; ZooKeeper), terminate (end the holder's
sessions: pg_terminate_backend on PostgreSQL, KILL CONNECTION on
MariaDB), master-kill, master-pause and master-partition (the
master killed, paused or cut off from its replicas and the Sentinels
until Sentinel fails over; on Cluster, the master of the lock's slot, cut
off from the other nodes, until its replica takes over),
replication-cut (the master cut off from its replicas only; Sentinel),
migrate (the
lock's slot moved to another master, one key at a time; Cluster), or
all, or none. Faults that do not apply to a backend are
left out for it.

Exit codes: 0 no violation outside the documented limits; 1 violations
outside them, or a client failed; 64 bad usage; 69 a server could not be
started; 130 interrupted (the results so far are printed).

Flags:
`

// Options are the parsed flags of "dlock chaos".
type Options struct {
	Backends       []string
	Faults         []string // nil: all that apply
	Duration       time.Duration
	Clients        int
	TTL            time.Duration
	Work           time.Duration
	SessionTimeout time.Duration
	Schedule       string // "cycle" or "random"
	Seed           uint64
	Format         string
	Timeline       string // HTML file, or "" for none
	AllBackends    bool   // --backend was not given, or given as all
	Defaults       bool   // --library-defaults
	TLS            bool   // --tls
}

// seedFlag is a flag.Value for a seed: a whole number from 1.
type seedFlag struct{ n *uint64 }

func (f seedFlag) String() string {
	if f.n == nil {
		return ""
	}
	return strconv.FormatUint(*f.n, 10)
}

func (f seedFlag) Set(s string) error {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil || n == 0 {
		return fmt.Errorf("want a whole number from 1 to %d", uint64(1<<64-1))
	}
	*f.n = n
	return nil
}

// faultsFlag is a flag.Value for --faults: a list, all or none.
type faultsFlag struct{ list *[]string }

func (f faultsFlag) String() string {
	if f.list == nil || *f.list == nil {
		return "all"
	}
	if len(*f.list) == 0 {
		return "none"
	}
	return strings.Join(*f.list, ",")
}

func (f faultsFlag) Set(s string) error {
	switch s {
	case "all":
		*f.list = nil
		return nil
	case "none":
		*f.list = []string{}
		return nil
	}
	return cmdutil.ListFlag{List: f.list, Choices: allFaults(), Item: "fault"}.Set(s)
}

// allFaults lists every fault any backend takes, in a fixed order.
func allFaults() []string {
	var all []string
	for _, b := range chaos.Backends {
		for _, f := range chaos.FaultsFor(b) {
			if !slices.Contains(all, f) {
				all = append(all, f)
			}
		}
	}
	return all
}

// backendsFlag is a flag.Value for --backend: a list or all.
type backendsFlag struct {
	list *[]string
	all  *bool
}

func (f backendsFlag) String() string {
	if f.list == nil {
		return ""
	}
	return strings.Join(*f.list, ",")
}

func (f backendsFlag) Set(s string) error {
	*f.all = s == "all"
	if *f.all {
		*f.list = slices.Clone(chaos.Backends)
		return nil
	}
	return cmdutil.ListFlag{List: f.list, Choices: chaos.Backends, Item: "backend"}.Set(s)
}

// FlagSet returns the flag set of "dlock chaos", bound to o, with defaults.
func FlagSet(o *Options) *flag.FlagSet {
	fs := cmdutil.NewFlagSet("dlock chaos")
	o.Backends, o.AllBackends = slices.Clone(chaos.Backends), true
	o.Duration, o.Clients, o.TTL, o.Work = DefaultDuration, chaos.DefaultClients, chaos.DefaultTTL, chaos.DefaultWork
	o.SessionTimeout, o.Schedule, o.Format = chaos.DefaultSessionTimeout, "cycle", FormatTable
	fs.Var(backendsFlag{&o.Backends, &o.AllBackends}, "backend", "backends to torture, comma-separated, or all: "+strings.Join(chaos.Backends, ", ")+" (default all)")
	fs.Var(faultsFlag{&o.Faults}, "faults", "faults to inject, comma-separated, all or none (default all)")
	fs.Var(cmdutil.DurationFlag{D: &o.Duration, Min: time.Second}, "duration", "how long each backend runs, faults included, from its clients' first grant (default 30s)")
	fs.Var(cmdutil.IntFlag{N: &o.Clients, Min: 2, Max: chaos.MaxClients}, "clients", fmt.Sprintf("client processes contending for the lock (default %d)", chaos.DefaultClients))
	fs.Var(cmdutil.DurationFlag{D: &o.TTL, Min: chaos.MinTTL}, "ttl", "lease time of the lock, renewed while held (default 1s)")
	fs.Var(cmdutil.DurationFlag{D: &o.Work, Min: time.Millisecond}, "work", "time each client spends in its critical section, at most a quarter of --ttl (default 20ms)")
	fs.Var(cmdutil.DurationFlag{D: &o.SessionTimeout, Min: 400 * time.Millisecond}, "session-timeout", "ZooKeeper session timeout (default 1.5s)")
	fs.Var(cmdutil.ChoiceFlag{S: &o.Schedule, Values: []string{"cycle", "random"}}, "schedule", "order of the faults: cycle (round-robin through --faults) or random (default cycle)")
	fs.Var(seedFlag{&o.Seed}, "seed", "seed of every random choice, to repeat a run (default: a new one, printed)")
	fs.Var(cmdutil.ChoiceFlag{S: &o.Format, Values: []string{FormatTable, FormatJSON}}, "o", "output format: table or json (default table)")
	fs.BoolVar(&o.Defaults, "library-defaults", false, "build the Redis clients as the README does (go-redis's own timeouts and retries) rather than tuned to the TTL")
	fs.BoolVar(&o.TLS, "tls", false, "reach the servers through TLS with client certificates, and log in with a password (Redis: an ACL user with the README's least rights; ZooKeeper: its secure client port and digest authentication); for the Redis backends but sentinel and cluster, and zk3")
	fs.StringVar(&o.Timeline, "timeline", "", "also write an HTML timeline of holders, faults and violations to this file, such as chaos.html")
	return fs
}

// Parse parses the arguments of "dlock chaos" (without "chaos").
func Parse(args []string) (Options, error) {
	var o Options
	pos, err := cmdutil.Parse(FlagSet(&o), args)
	if err != nil {
		return o, err
	}
	switch {
	case len(pos) > 0:
		return o, cmdutil.Usagef("dlock chaos: takes no arguments, got %q; give everything as flags (run 'dlock chaos --help')", pos)
	case o.Work > o.TTL/4:
		return o, cmdutil.Usagef("dlock chaos: --work %v is more than a quarter of --ttl %v; use a shorter --work or a longer --ttl", o.Work, o.TTL)
	case o.Timeline != "" && !strings.EqualFold(filepath.Ext(o.Timeline), ".html"):
		return o, cmdutil.Usagef("dlock chaos: --timeline %q: the timeline is an HTML page; give a file name ending in .html", o.Timeline)
	}
	if o.TLS && o.AllBackends { // every backend: leave out those that do not run with TLS
		o.Backends = slices.DeleteFunc(o.Backends, func(b string) bool { return !chaos.TLSBackend(b) })
	}
	for _, b := range o.Backends {
		if o.TLS && !chaos.TLSBackend(b) {
			return o, cmdutil.Usagef("dlock chaos: --backend %s does not run with --tls; those that do: %s", b,
				strings.Join(slices.DeleteFunc(slices.Clone(chaos.Backends), func(b string) bool { return !chaos.TLSBackend(b) }), ","))
		}
	}
	if o.AllBackends && len(o.Faults) > 0 { // every backend: leave out those none of the faults applies to
		o.Backends = slices.DeleteFunc(o.Backends, func(b string) bool { return len(o.faultsFor(b)) == 0 })
		if len(o.Backends) == 0 {
			return o, cmdutil.Usagef("dlock chaos: none of --faults %s applies to any backend", strings.Join(o.Faults, ","))
		}
	}
	for _, b := range o.Backends {
		if o.Faults != nil && len(o.Faults) > 0 && len(o.faultsFor(b)) == 0 {
			return o, cmdutil.Usagef("dlock chaos: none of --faults %s applies to %s; it takes %s", strings.Join(o.Faults, ","), b, strings.Join(chaos.FaultsFor(b), ","))
		}
	}
	return o, nil
}

// faultsFor returns the faults to inject on backend b: those of --faults
// that apply to it, in its own order.
func (o Options) faultsFor(b string) []string {
	if o.Faults == nil {
		return chaos.FaultsFor(b)
	}
	return slices.DeleteFunc(chaos.FaultsFor(b), func(f string) bool { return !slices.Contains(o.Faults, f) })
}
