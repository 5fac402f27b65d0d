package lease

import (
	"sync"
	"sync/atomic"
	"time"
)

// The expiry of held leases is kept in a few shared heaps, each with one
// timer armed for its earliest lease, rather than in a timer per lease: a
// process that holds a million leases keeps a million small heap slots,
// not a million runtime timers and their closures. A lease is in the heap
// at the deadline it had when it was put there; Extend, which only moves
// the deadline later, leaves it so, and when that time comes the lease
// finds its deadline moved and goes back in at the new one (see
// State.expire). So a lease renewed every third of its TTL moves in its
// heap about once a TTL, not at every renewal.

// expiryShards spreads the leases over heaps with locks of their own, so
// that many goroutines taking and releasing leases do not queue on one.
const expiryShards = 8

var (
	shards    [expiryShards]expiryShard
	nextShard atomic.Uint32
	// epoch is the origin of the heaps' times: a monotonic clock reading,
	// so that a step of the wall clock moves no deadline.
	epoch = time.Now()
)

// A moment is a time as a State keeps it: nanoseconds since epoch, on
// the monotonic clock when the time it was made from has a reading of it.
type moment int64

// at returns t as a moment.
func at(t time.Time) moment { return moment(t.Sub(epoch)) }

// now returns the current moment.
func now() moment { return at(time.Now()) }

// time returns m as a time.Time.
func (m moment) time() time.Time { return epoch.Add(time.Duration(m)) }

// An expiryShard is one heap of leases by deadline, and its timer.
type expiryShard struct {
	mu      sync.Mutex
	q       []*State
	timer   *time.Timer
	armedAt moment // when timer fires; 0 when it is not armed
}

// schedule puts s in its heap at its deadline until, or moves it there.
// s.mu must be held.
func (s *State) schedule(at moment) {
	sh := &shards[s.shard]
	sh.mu.Lock()
	s.at = at
	if s.slot >= 0 {
		sh.fix(int(s.slot))
	} else {
		s.slot = int32(len(sh.q))
		sh.q = append(sh.q, s)
		sh.up(int(s.slot))
	}
	if sh.armedAt == 0 || at < sh.armedAt {
		sh.arm(at)
	}
	sh.mu.Unlock()
}

// unschedule takes s out of its heap, if it is there. s.mu must be held.
// The timer is left alone: firing early is harmless.
func (s *State) unschedule() {
	sh := &shards[s.shard]
	sh.mu.Lock()
	if s.slot >= 0 {
		sh.remove(int(s.slot))
	}
	sh.mu.Unlock()
}

// arm sets the timer for at. sh.mu must be held.
func (sh *expiryShard) arm(at moment) {
	sh.armedAt = max(at, 1)
	// at - now, or 0 for a deadline past: at may be far enough back (the
	// zero time) that the difference overflows into the far future, which
	// would leave this heap unarmed until then.
	var d time.Duration
	if n := now(); at > n {
		d = time.Duration(at - n)
	}
	if sh.timer == nil {
		sh.timer = time.AfterFunc(d, sh.fire)
	} else {
		sh.timer.Reset(d)
	}
}

// fire ends, or moves, every lease whose time has come.
func (sh *expiryShard) fire() {
	now := now()
	var due []*State
	sh.mu.Lock()
	sh.armedAt = 0
	for len(sh.q) > 0 && sh.q[0].at <= now {
		due = append(due, sh.q[0])
		sh.remove(0)
	}
	if len(sh.q) > 0 {
		sh.arm(sh.q[0].at)
	}
	sh.mu.Unlock()
	for _, s := range due {
		if !s.moved() {
			// Each on a goroutine of its own, as a timer per lease would
			// run it: an end runs the backend's onEnd and the observer,
			// which must not hold up the other leases' ends.
			go s.expire()
		}
	}
}

// moved puts s back in its heap at its deadline, if Extend moved that,
// and reports whether s is held still, or has ended already.
func (s *State) moved() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return true
	}
	if now() < s.until {
		s.schedule(s.until)
		return true
	}
	return false
}

// The heap: sh.mu must be held, and each State's slot is its index.

func (sh *expiryShard) less(i, j int) bool { return sh.q[i].at < sh.q[j].at }

func (sh *expiryShard) swap(i, j int) {
	q := sh.q
	q[i], q[j] = q[j], q[i]
	q[i].slot, q[j].slot = int32(i), int32(j)
}

func (sh *expiryShard) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !sh.less(j, i) {
			break
		}
		sh.swap(i, j)
		j = i
	}
}

func (sh *expiryShard) down(i int) bool {
	i0, n := i, len(sh.q)
	for {
		j := 2*i + 1
		if j >= n || j < 0 {
			break
		}
		if r := j + 1; r < n && sh.less(r, j) {
			j = r
		}
		if !sh.less(j, i) {
			break
		}
		sh.swap(i, j)
		i = j
	}
	return i > i0
}

func (sh *expiryShard) fix(i int) {
	if !sh.down(i) {
		sh.up(i)
	}
}

func (sh *expiryShard) remove(i int) {
	n := len(sh.q) - 1
	if i != n {
		sh.swap(i, n)
	}
	s := sh.q[n]
	sh.q[n] = nil
	sh.q = sh.q[:n]
	s.slot = -1
	if i != n {
		sh.fix(i)
	}
	// A heap that held many leases and now holds few gives its memory back.
	if c := cap(sh.q); c > 1024 && len(sh.q) <= c/4 {
		sh.q = append([]*State(nil), sh.q...)
	}
}
