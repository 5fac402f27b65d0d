package zklock

import "sync"

// An inflight counts the calls under way on a link.
type inflight struct {
	mu       sync.Mutex
	n        int
	draining bool
	idle     chan struct{} // closed when n falls to 0 while draining
}

// begin counts a call in, or reports false once drain was called.
func (f *inflight) begin() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.draining {
		return false
	}
	f.n++
	return true
}

func (f *inflight) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 && f.draining {
		close(f.idle)
	}
}

// drain refuses calls from now on, and returns a channel closed when
// none is under way.
func (f *inflight) drain() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.draining {
		f.draining = true
		f.idle = make(chan struct{})
		if f.n == 0 {
			close(f.idle)
		}
	}
	return f.idle
}
