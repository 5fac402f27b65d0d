package redisscript

import (
	"strconv"

	"github.com/dlock-go/dlock/redisconn"
)

// The typed calls of a count-down latch's scripts; see calls.go.

// LatchSetCall is a call of latch_set.lua: set the count of a latch unless
// it is counting. The reply is 1 when the count was set, 0 when the latch
// was already counting.
type LatchSetCall struct {
	Count string // KEYS[1]: the count's key
	N     int    // ARGV[1]: the count (>= 1)
	// Life (ARGV[2]) is how long the latch lasts, in milliseconds: a
	// latch not counted down to zero by then is gone.
	Life string
}

// Call returns the call of LatchSet.
func (s LatchSetCall) Call() redisconn.Call {
	return redisconn.Call{Script: LatchSet, Keys: []string{s.Count}, Args: []string{strconv.Itoa(s.N), s.Life}}
}

// LatchCountCall is a call of latch_count.lua: the count of a latch, 0
// when it is not counting. It writes nothing.
type LatchCountCall struct {
	Count string // KEYS[1]: the count's key
}

// Call returns the call of LatchCount.
func (c LatchCountCall) Call() redisconn.Call {
	return redisconn.Call{Script: LatchCount, Keys: []string{c.Count}}
}

// LatchCountDownCall is a call of latch_countdown.lua: count a latch down
// by one, and at zero delete it and wake the waiters. The reply is the
// count left; a latch that is not counting is left alone, and 0 returned.
// The outcome is recorded under Record, so that the request, sent again,
// counts nothing and gets the same reply.
type LatchCountDownCall struct {
	Count   string // KEYS[1]: the count's key
	Record  string // KEYS[2]: this request's record
	Channel string // ARGV[1]: the zero channel
	Life    string // ARGV[2]: the latch's life in ms, for the count left
	// RecordLife (ARGV[3]) is how long the record is kept, in
	// milliseconds.
	RecordLife string
}

// Call returns the call of LatchCountDown.
func (c LatchCountDownCall) Call() redisconn.Call {
	return redisconn.Call{Script: LatchCountDown, Keys: []string{c.Count, c.Record}, Args: []string{c.Channel, c.Life, c.RecordLife}}
}
