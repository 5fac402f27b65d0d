package mysqllock

import "sync"

// waiters are a Client's Lock calls waiting for a lock, by name. MySQL has
// no LISTEN/NOTIFY: a waiter polls (see DefaultRetry); but a release made
// through the same Client wakes its waiters of that lock at once.
type waiters struct {
	mu sync.Mutex
	m  map[string]map[*waiter]struct{}
}

// A waiter is one Lock call waiting for a lock.
type waiter struct {
	ws   *waiters
	name string
	c    chan struct{} // receives when the lock may have been released
}

// wait registers a waiter for the lock called name. The caller must close
// it.
func (ws *waiters) wait(name string) *waiter {
	w := &waiter{ws: ws, name: name, c: make(chan struct{}, 1)}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.m == nil {
		ws.m = make(map[string]map[*waiter]struct{})
	}
	if ws.m[name] == nil {
		ws.m[name] = make(map[*waiter]struct{})
	}
	ws.m[name][w] = struct{}{}
	return w
}

// close unregisters w.
func (w *waiter) close() {
	w.ws.mu.Lock()
	defer w.ws.mu.Unlock()
	delete(w.ws.m[w.name], w)
	if len(w.ws.m[w.name]) == 0 {
		delete(w.ws.m, w.name)
	}
}

// wake wakes the waiters of the lock called name.
func (ws *waiters) wake(name string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.m[name] {
		select {
		case w.c <- struct{}{}:
		default: // already woken
		}
	}
}

// wakeAll wakes every waiter, as Close does, so that they see it.
func (ws *waiters) wakeAll() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, m := range ws.m {
		for w := range m {
			select {
			case w.c <- struct{}{}:
			default:
			}
		}
	}
}
