package fence

import (
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
)

// An Option configures a guard made by NewSQL, NewRedis or NewMemory.
type Option func(*config)

type config struct {
	table      string         // NewSQL's table
	observer   dlock.Observer // nil: none
	acceptLoss bool           // NewRedis: no check of the server's persistence
	maxJump    uint64         // 0: no bound
	err        error          // from an invalid option, returned by every call
}

// newConfig returns the configuration of opts, with the defaults.
func newConfig(opts []Option) config {
	c := config{table: DefaultTable}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// WithTable sets the table in which an SQL guard keeps its fences; other
// guards ignore it. The default is DefaultTable. The name may be qualified
// by a schema ("app.fences") and must need no quoting: letters, digits
// and underscores. pglock's Client keeps its fences in a table of the
// same layout, named after its lock table with "_fences" appended: an SQL
// guard given that name shares pglock's records.
func WithTable(name string) Option {
	return func(c *config) {
		if !identifier.MatchString(name) {
			c.err = fmt.Errorf("fence: table name %q is not letters, digits and underscores, with at most one dot", name)
			return
		}
		c.table = name
	}
}

// WithObserver has the guard report each write it accepts or refuses to
// o, as dlock.EventFenceAccepted or dlock.EventFenceRefused events (Err
// the *StaleError or *TooHighError), named after the resource, and each
// reset as dlock.EventFenceReset; dlockprom's Collector counts the first
// two. The default is no observer.
func WithObserver(o dlock.Observer) Option {
	return func(c *config) { c.observer = o }
}

// AcceptFenceLoss lets a Redis guard use a server that does not write
// every write to disk before it answers (appendonly yes, appendfsync
// always), or may evict keys without a TTL, or whose configuration it
// cannot read, which it otherwise refuses with ErrNotPersistent. The
// risk is a stale write accepted: such a server forgets fences when it
// restarts (or loses its last second or two of writes when its machine
// crashes, with appendfsync everysec) or evicts them, and then accepts
// any fence for a key until a current holder writes to it again. Take it
// only where that cannot happen or does not matter. The Store of an SQL
// guard takes it too (see SQL.Store); other guards ignore it. The default
// is to refuse.
func AcceptFenceLoss() Option {
	return func(c *config) { c.acceptLoss = true }
}

// WithMaxJump has the guard refuse a fence more than n above the newest
// fence accepted for its resource, with a *TooHighError matching
// ErrTooHigh (and Handler with 400 Bad Request), recording nothing. It
// bounds what one request with a forged fence can do: a fence of 2^63-1,
// once accepted, makes every real holder's fence stale until an operator
// resets the resource (see Resetter). The first fence of a resource, or
// the first after a reset to 0, is not bounded. The default, and n 0, is
// no bound.
//
// No bound is right for every lock, because fences jump by different
// amounts: redislock, redlock, pglock and mysqllock give fences that
// follow the server's clock in microseconds, so a resource written again
// after d sees a fence about d in microseconds higher (2^40 is 12.7
// days); zklock's rise by 2^12 per millisecond when the lock's path is
// created again (a reaped container: after 2^40, 3.1 days); etcdlock's by
// the number of writes the whole cluster made in between. Choose n above
// the largest jump a real holder can bring, from the lock's backend and
// the longest time the resource may go unwritten; a holder refused after
// a longer pause is let in by a reset. NewMemory, NewRedis and NewSQL take
// it (for every call of the guard); Row and WriteFile do not.
func WithMaxJump(n uint64) Option {
	return func(c *config) { c.maxJump = n }
}

// observe reports the outcome err of guard's check of fence for resource:
// nil for accepted, a *StaleError for refused, and nothing for other
// errors, which decided nothing.
func observe(o dlock.Observer, guard, resource string, fence uint64, err error) {
	if o == nil {
		return
	}
	e := dlock.Event{Kind: dlock.EventFenceAccepted, Name: resource, Lock: guard, Fence: fence}
	if err != nil {
		if !errors.Is(err, ErrStale) && !errors.Is(err, ErrTooHigh) {
			return
		}
		e.Kind, e.Err = dlock.EventFenceRefused, err
	}
	o.Observe(e)
}
