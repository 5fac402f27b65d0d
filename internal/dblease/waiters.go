package dblease

import "sync"

// Waiters are a Client's Lock calls waiting for a lock, by name, for a
// release to wake them. The zero value is ready for use.
type Waiters struct {
	mu sync.Mutex
	m  map[string]map[*Waiter]struct{}
}

// A Waiter is one Lock call waiting for a lock.
type Waiter struct {
	ws   *Waiters
	name string
	c    chan struct{} // receives when the lock may have been released
}

// Wait registers a waiter for the lock called name. The caller must close
// it.
func (ws *Waiters) Wait(name string) *Waiter {
	w := &Waiter{ws: ws, name: name, c: make(chan struct{}, 1)}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.m == nil {
		ws.m = make(map[string]map[*Waiter]struct{})
	}
	if ws.m[name] == nil {
		ws.m[name] = make(map[*Waiter]struct{})
	}
	ws.m[name][w] = struct{}{}
	return w
}

// C receives when the lock may have been released.
func (w *Waiter) C() <-chan struct{} { return w.c }

// Close unregisters w.
func (w *Waiter) Close() {
	w.ws.mu.Lock()
	defer w.ws.mu.Unlock()
	delete(w.ws.m[w.name], w)
	if len(w.ws.m[w.name]) == 0 {
		delete(w.ws.m, w.name)
	}
}

// Wake wakes the waiters of the lock called name.
func (ws *Waiters) Wake(name string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.m[name] {
		w.wake()
	}
}

// WakeAll wakes every waiter.
func (ws *Waiters) WakeAll() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, m := range ws.m {
		for w := range m {
			w.wake()
		}
	}
}

func (w *Waiter) wake() {
	select {
	case w.c <- struct{}{}:
	default: // already woken
	}
}
