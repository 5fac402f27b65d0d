package redisscript

import "github.com/dlock-go/dlock/redisconn"

// The typed calls of the fair (FIFO) lock's scripts; see calls.go.

// FairAcquireCall is a call of fair_acquire.lua: take a fair lock if it is
// free and its queue is empty or headed by Waiter, or else (with Join) put
// Waiter in the queue. Waiters at the head whose deadline has passed are
// dropped first. The reply is the new fence (> 0) when taken, or minus the
// expected wait in milliseconds (<= 0).
type FairAcquireCall struct {
	Lock      string // KEYS[1]: the lock key
	Queue     string // KEYS[2]: the queue, a list of waiter tokens
	Deadlines string // KEYS[3]: the waiters' deadlines, a sorted set
	Fence     string // KEYS[4]: the fence counter of the lock's slot
	Waiter    string // ARGV[1]: the waiter token, its place in the queue
	TTL       string // ARGV[2]: the TTL in milliseconds
	Timeout   string // ARGV[3]: the waiter timeout in milliseconds
	// Join (ARGV[4] '1', else '0') puts Waiter in the queue, or keeps it
	// there, when the lock is not taken.
	Join bool
	// Token (ARGV[5]) is the token the lock is taken with: the attempt's
	// own, so that a clean-up of the attempt never releases a later
	// attempt's grant to the same waiter.
	Token string
}

// Call returns the call of FairAcquire.
func (a FairAcquireCall) Call() redisconn.Call {
	join := "0"
	if a.Join {
		join = "1"
	}
	return redisconn.Call{Script: FairAcquire, Keys: []string{a.Lock, a.Queue, a.Deadlines, a.Fence},
		Args: []string{a.Waiter, a.TTL, a.Timeout, join, a.Token}}
}

// FairReleaseCall is a call of fair_release.lua: delete a fair lock if
// Token holds it, and wake the head of its queue only. The reply is 1 plus
// the number of subscribers woken when released, 0 when the key is absent
// or another owner's. Sent twice, the second run does nothing.
type FairReleaseCall struct {
	Lock      string // KEYS[1]: the lock key
	Queue     string // KEYS[2]: the queue
	Deadlines string // KEYS[3]: the waiters' deadlines
	Token     string // ARGV[1]: the owner token
	Wake      string // ARGV[2]: the prefix of the waiters' own channels
	// Timeout (ARGV[3]), if not empty, puts the owner back at the head of
	// the queue with that waiter timeout in milliseconds, for a waiter that
	// gives back a grant that came too late; Waiter (ARGV[4]) is then its
	// waiter token, if the lock was taken with a token of the attempt's
	// own.
	Timeout, Waiter string
}

// Call returns the call of FairRelease.
func (r FairReleaseCall) Call() redisconn.Call {
	args := []string{r.Token, r.Wake}
	if r.Timeout != "" {
		args = append(args, r.Timeout, r.Waiter)
	}
	return redisconn.Call{Script: FairRelease, Keys: []string{r.Lock, r.Queue, r.Deadlines}, Args: args}
}

// FairLeaveCall is a call of fair_leave.lua: take a waiter that gives up
// out of a fair lock's queue, and wake the new head if the lock is free.
// The reply is the number of queue entries removed.
type FairLeaveCall struct {
	Lock      string // KEYS[1]: the lock key
	Queue     string // KEYS[2]: the queue
	Deadlines string // KEYS[3]: the waiters' deadlines
	Waiter    string // ARGV[1]: the waiter token
	Wake      string // ARGV[2]: the prefix of the waiters' own channels
}

// Call returns the call of FairLeave.
func (l FairLeaveCall) Call() redisconn.Call {
	return redisconn.Call{Script: FairLeave, Keys: []string{l.Lock, l.Queue, l.Deadlines}, Args: []string{l.Waiter, l.Wake}}
}
