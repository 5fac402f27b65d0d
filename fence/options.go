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
// o, as dlock.EventFenceAccepted or dlock.EventFenceRefused events, named
// after the resource; dlockprom's Collector counts them. The default is
// no observer.
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

// observe reports the outcome err of guard's check of fence for resource:
// nil for accepted, a *StaleError for refused, and nothing for other
// errors, which decided nothing.
func observe(o dlock.Observer, guard, resource string, fence uint64, err error) {
	if o == nil {
		return
	}
	e := dlock.Event{Kind: dlock.EventFenceAccepted, Name: resource, Lock: guard, Fence: fence}
	if err != nil {
		if !errors.Is(err, ErrStale) {
			return
		}
		e.Kind, e.Err = dlock.EventFenceRefused, err
	}
	o.Observe(e)
}
