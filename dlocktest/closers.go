package dlocktest

import (
	"fmt"
	"sync"

	"github.com/dlock-go/dlock"
)

// Closers remembers the client behind each Locker a Backend's NewLocker
// made, so that its Close method can serve as Backend.CloseClient. The
// zero value is ready to use.
type Closers struct {
	closers sync.Map // dlock.Locker → func() error
}

// Add records closeClient as the Close of the client l was made on, and
// returns l.
func (c *Closers) Add(l dlock.Locker, closeClient func() error) dlock.Locker {
	c.closers.Store(l, closeClient)
	return l
}

// Close closes the client l was made on.
func (c *Closers) Close(l dlock.Locker) error {
	f, ok := c.closers.Load(l)
	if !ok {
		return fmt.Errorf("dlocktest: no client recorded for the lock %q (Closers.Add)", l.Name())
	}
	return f.(func() error)()
}
