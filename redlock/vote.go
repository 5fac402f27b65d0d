package redlock

import (
	"fmt"
	"strings"
	"time"
)

// vote is one node's answer to an acquire (quorum_acquire.lua).
type vote struct {
	taken bool
	// counter is the node's fence counter after this acquire, or 0 when
	// the node has none it may use yet (see quorum_acquire.lua).
	counter uint64
	// timeUS is the node's clock, in microseconds, when the script read
	// it, and 0 when it did not need to: a node that has outlasted the
	// restart window, with a counter to increment, reports no time.
	timeUS int64
	// up is at least how long the node's server has been running, and
	// epochAge at least the age of its epoch (when its data began); both
	// -1 when restart detection is off.
	up, epochAge time.Duration
	// created identifies the node's epoch: when it was created, in ms on
	// the node's clock (-1 when restart detection is off).
	created int64
}

func parseVote(v any) (vote, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 6 {
		return vote{}, fmt.Errorf("unexpected reply %T %v", v, v)
	}
	n := make([]int64, len(a))
	for i := range a {
		if n[i], ok = a[i].(int64); !ok {
			return vote{}, fmt.Errorf("unexpected reply element %T %v", a[i], a[i])
		}
	}
	ms := func(x int64) time.Duration {
		if x < 0 {
			return -1
		}
		return time.Duration(x) * time.Millisecond
	}
	return vote{taken: n[0] == 1, counter: uint64(max(n[1], 0)), timeUS: n[2], up: ms(n[3]), epochAge: ms(n[4]), created: n[5]}, nil
}

// bootSlack is how much earlier than the latest boot time the script
// computes the server can have started: uptime_in_seconds counts whole
// seconds between two truncated readings of a clock the server caches.
// An epoch older than the uptime by more than this was created before
// the server started.
const bootSlack = 3 * time.Second

// An abstention is why a node that took the key may not vote yet.
type abstention struct {
	node   string
	reason string        // "restarted", "lost its data"
	ago    time.Duration // since the restart or the loss
	left   time.Duration // until it may vote
}

func (a abstention) String() string {
	ago := "under a second"
	if a.ago >= time.Second {
		ago = a.ago.Round(100 * time.Millisecond).String()
	}
	return fmt.Sprintf("%s %s %s ago and votes in %v at most", a.node, a.reason, ago, a.left.Round(time.Millisecond))
}

// judge returns whether node i, which answered v, may vote under the
// restart window; when it may not, the abstention says why.
//
// A node may vote once its data is older than the window: its server has
// run for at least the window (a restart may have lost keys granted
// before it, from the last snapshot on or from everything), and, when
// this client saw its epoch change (FLUSHALL, or a restart), the new
// epoch is as old. A node that persists every write before it answers
// (appendonly yes, appendfsync always), whose epoch is older than the
// running server, lost nothing in its restart and votes at once.
func (c *Client) judge(i int, v vote) (bool, abstention) {
	window := c.cfg.restartWindow
	if !c.cfg.detectRestart {
		return true, abstention{}
	}
	reset, always := c.observe(i, v)
	age, reason := v.up, "restarted"
	if always && v.epochAge > v.up+bootSlack {
		age = window // its restart lost nothing
	}
	if reset && v.epochAge < age {
		age, reason = v.epochAge, "lost its data"
	}
	if age >= window {
		return true, abstention{}
	}
	return false, abstention{node: c.nodes[i].name, reason: reason, ago: age, left: window - age}
}

// observe records the epoch node i reported, and returns whether this
// Client has seen it change (the node lost its data at the new epoch's
// creation) and whether the node persists every write.
func (c *Client) observe(i int, v vote) (reset, always bool) {
	if !c.cfg.detectRestart {
		return false, false
	}
	st := c.state[i]
	st.mu.Lock()
	defer st.mu.Unlock()
	switch created := v.created; {
	case st.epoch == 0:
		st.epoch = created
	case st.epoch != created:
		st.epoch, st.reset = created, true
	}
	return st.reset, st.fsync == fsyncAlways
}

// abstained describes the abstentions of an attempt, for its error.
func (c *Client) abstained(as []abstention) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return fmt.Sprintf("%d more node(s) took the lock but may not vote yet, to outlast any lease granted before they lost data (restart window %v): %s",
		len(as), c.cfg.restartWindow, strings.Join(s, "; "))
}
