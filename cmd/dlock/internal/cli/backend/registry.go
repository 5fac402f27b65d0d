package backend

import (
	"cmp"
	"context"
	"flag"
	"slices"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// A driver is one kind of lock service the command can use. Each backend
// registers one, in its own file, with register; the command reaches a
// backend only through its driver and the conn it connects, so that
// inspect, release, run and elect have no arm per backend.
type driver struct {
	name  string // Spec.Kind and Report.Backend: "redis", "redlock", ...
	title string // how messages name it: "Redis", "PostgreSQL", "etcd"
	order int    // where it comes in lists for people: help, messages

	// flag names the flag that names the backend's service ("etcd":
	// --etcd), example shows it for the message that asks for a service
	// ("--etcd host:port"), and env lists the environment variables that
	// tell dlock how to reach it, credentials included, the one read in
	// the flag's stead first; passwordEnv those of env that hold a
	// password alone. A backend named by another's flag (Redlock: --redis)
	// has none of them.
	flag, example    string
	env, passwordEnv []string
	// flags adds the backend's own flags to fs, to be kept in f.
	flags func(fs *flag.FlagSet, f *Flags)
	// given reports whether f names the backend's service; fromEnv
	// fills in f's flag from the environment, when no flag names a
	// service.
	given   func(f *Flags) bool
	fromEnv func(f *Flags, getenv func(string) string)
	// check returns a UsageError for what is wrong with f's naming of
	// the service, before anything else is checked; nil: nothing.
	check func(f *Flags) error
	// checkFlags returns a UsageError for the backend's own flags given
	// without its service (named: f names it), or with what they do not
	// go with.
	checkFlags func(f *Flags, getenv func(string) string, named bool) error
	// resolve fills in spec from f, which names the backend's service:
	// filed is the password of --password-file, if given.
	resolve func(f *Flags, getenv func(string) string, filed string, spec *Spec) error
	// session: the backend has session mode (--session); table: it keeps
	// its locks in a table that --table names.
	session, table bool

	// claims reports whether spec names this backend. No two drivers
	// claim one Spec.
	claims func(spec Spec) bool
	// describe names the service spec gives, for messages, without the
	// backend's name: "127.0.0.1:6379".
	describe func(spec Spec) string
	// checkName returns a UsageError for what the backend refuses in a
	// lock name, beyond what CheckName refuses on every backend; nil
	// takes every such name.
	checkName func(name string) error
	// checkKind returns a UsageError if spec's service does not have the
	// lock kind, which is not KindMutex (every backend has that); nil
	// has every kind.
	checkKind func(spec Spec, kind string) error
	// nodes returns a Spec for each server of spec's service alone, as
	// dlock bench measures them.
	nodes func(spec Spec) []Node
	// connect connects to the service spec gives and checks that it
	// answers; on an error it leaves nothing open.
	connect func(ctx context.Context, spec Spec, obs dlock.Observer) (conn, error)
	// refused turns the service's refusal of a login into a UsageError
	// (exit 64) that says what to check; other errors it returns as they
	// are. nil: the driver has none, or finds it connecting.
	refused func(err error) error
	// denied turns a refusal that no retry heals (a privilege the account
	// lacks) into a UsageError that names the grant; other errors it
	// returns as they are.
	denied func(err error) error
	// oncePer: the backend keeps the records of dlock run --once-per
	// (its conn is a runRecorder).
	oncePer bool

	// What dlock release says it removed, one and more than one; ""
	// for "holder" and "holders".
	removed, removedMany string
	// What dlock release says became of the waiters; "" for "waiters
	// were woken".
	woken string
	// fenceNote is what inspect says the latest fence is; "" for "latest
	// granted".
	fenceNote string
	// waiters says whether inspect can count the waiters.
	waiters waiterCount
}

// waiterCount says what inspect knows of a backend's waiters.
type waiterCount int

const (
	waitersCounted   waiterCount = iota // the service knows them
	waitersUncounted                    // they wait in their own processes (Report.Waiters is nil)
	waitersNone                         // the backend has no queue (Redlock): no row
)

// A conn is a connection to one lock service, made by its driver.
type conn interface {
	// locker returns the lock called name of the kind o asks for, a kind
	// the driver has (Target.Locker checked).
	locker(name string, o LockOptions) (dlock.Locker, error)
	// election returns the election called name, whose leader holds a
	// mutex for ttl at a time.
	election(name string, ttl time.Duration) (dlock.Election, error)
	// admin returns the Client that inspects and releases the lock called
	// name, the name it knows the lock by (a path on ZooKeeper), and what
	// inspect shows as the lock's path ("" for none).
	admin(name string) (a dlock.Admin, key, path string)
	// close gives back every lease still held and closes the connections.
	close()
}

// What a conn may do beside a conn's own, where its backend needs it.
type (
	// An inspector reports on a lock its own way (Redlock: each master's
	// view, and the majority's), rather than through its admin.
	inspector interface {
		inspect(ctx context.Context, name string, r *Report) error
	}
	// A forceReleaser releases a lock its own way, and counts what it
	// removed (Redlock: the masters' keys).
	forceReleaser interface {
		forceRelease(ctx context.Context, name string) (int, error)
	}
	// A forcedNoter leaves a note of a forced release beside the lock,
	// which inspect shows (Redis, Redlock).
	forcedNoter interface {
		noteForced(ctx context.Context, name string, removed int)
		forcedNote(ctx context.Context, name string) string
	}
	// A runRecorder keeps the records of dlock run --once-per.
	runRecorder interface {
		lastRun(ctx context.Context, name string) (ago time.Duration, found bool, err error)
		recordRun(ctx context.Context, name string, keep time.Duration) error
		// clearRun removes the record, and reports whether there was one.
		clearRun(ctx context.Context, name string) (bool, error)
	}
	// A leaseTimer grants leases shorter than asked (ZooKeeper).
	leaseTimer interface {
		leaseTime(ttl time.Duration) time.Duration
	}
	// A describer says more about the connection than Spec.Describe
	// (PostgreSQL: the TLS it negotiated).
	describer interface {
		describe() string
	}
	// A warner has something to tell the user, learnt connecting.
	warner interface {
		warnings() []string
	}
)

// A Node is one server of a service, as a service of its own.
type Node struct {
	Addr string
	Spec Spec
}

// drivers are the registered drivers, in their order.
var drivers []*driver

// register adds d to the drivers the command knows. Each backend's file
// calls it once, from a package-level variable's initialiser.
func register(d *driver) *driver {
	if d.name == "" || d.claims == nil || d.connect == nil || d.describe == nil {
		panic("backend: incomplete driver " + d.name)
	}
	for _, o := range drivers {
		if o.name == d.name || o.order == d.order {
			panic("backend: driver " + d.name + " registered twice")
		}
	}
	drivers = append(drivers, d)
	slices.SortFunc(drivers, func(a, b *driver) int { return cmp.Compare(a.order, b.order) })
	return d
}

// driverOf returns the driver that claims spec, or nil.
func driverOf(spec Spec) *driver {
	for _, d := range drivers {
		if d.claims(spec) {
			return d
		}
	}
	return nil
}

// driverNamed returns the driver called name, or nil.
func driverNamed(name string) *driver {
	for _, d := range drivers {
		if d.name == name {
			return d
		}
	}
	return nil
}

// unknownKind is the error for a lock kind that is not one of Kinds.
func unknownKind(kind string) error {
	return cmdutil.Usagef("--kind %q is not one of %s", kind, strings.Join(Kinds, ", "))
}

// Refused turns a login that a lock service refused (PostgreSQL, MySQL)
// into a UsageError (exit 64) that says what to check; other errors it
// returns as they are.
func Refused(err error) error {
	for _, d := range drivers {
		if d.refused != nil && err != nil {
			err = d.refused(err)
		}
	}
	return err
}

// Denied turns a refusal that no retry heals (a privilege the account
// lacks, credentials a ZooKeeper node asks for) into a UsageError (exit
// 64) that names the grant; other errors it returns as they are.
func Denied(err error) error {
	for _, d := range drivers {
		if d.denied != nil && err != nil {
			err = d.denied(err)
		}
	}
	return err
}
