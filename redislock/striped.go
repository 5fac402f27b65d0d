package redislock

import (
	"fmt"
	"hash/fnv"
)

// Striped is a fixed set of n mutexes that resources share by a stable
// hash of their id: "split the inventory into segments", so that work on
// different items rarely contends while the number of locks stays bounded.
// The same id always maps to the same stripe, in every process, as long as
// name and n stay the same.
type Striped struct {
	stripes []*Mutex
	err     error
	c       *Client
	name    string
}

// NewStriped returns n stripes called name:0 ... name:n-1, with opts. It
// never fails: n < 1 or a bad name is reported by the mutexes' Lock.
func (c *Client) NewStriped(name string, n int, opts ...Option) *Striped {
	s := &Striped{c: c, name: name}
	if n < 1 {
		s.err = fmt.Errorf("redislock: NewStriped(%q, %d): want at least one stripe", name, n)
		return s
	}
	s.stripes = make([]*Mutex, n)
	for i := range s.stripes {
		s.stripes[i] = c.NewMutex(fmt.Sprintf("%s:%d", name, i), opts...)
	}
	return s
}

// Len returns the number of stripes.
func (s *Striped) Len() int { return len(s.stripes) }

// Stripe returns the index of the stripe id maps to, by 64-bit FNV-1a.
func (s *Striped) Stripe(id string) int {
	if len(s.stripes) == 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return int(h.Sum64() % uint64(len(s.stripes)))
}

// For returns the mutex that guards id.
func (s *Striped) For(id string) *Mutex {
	if s.err != nil {
		m := s.c.NewMutex(s.name)
		m.err = s.err
		return m
	}
	return s.stripes[s.Stripe(id)]
}
