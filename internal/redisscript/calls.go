package redisscript

import (
	"strconv"

	"github.com/dlock-go/dlock/redisconn"
)

// The typed calls below, and those of calls_*.go (one file for each kind
// of lock, and one for the operators' scripts), build a script's KEYS and
// ARGV from named fields, in the order the script reads them; each doc
// comment restates the script's contract, which its .lua header gives in
// full. A caller sets the fields and calls Call; it never writes a
// positional slice.

// AcquireCall is a call of acquire.lua (Mutex) or reentrant_acquire.lua
// (ReentrantMutex), which read the same keys and arguments: take a free
// lock, or re-enter it for its owner, and draw a fence from the slot's
// counter. The reply is the fence (> 0) when taken, or minus the holder's
// remaining TTL in milliseconds (<= 0) when another owner holds it; an
// error DLOCKKIND says another kind of lock holds the name.
type AcquireCall struct {
	Lock  string // KEYS[1]: the lock key (a hash for a ReentrantMutex)
	Fence string // KEYS[2]: the fence counter of the lock's slot
	Token string // ARGV[1]: the owner token
	TTL   string // ARGV[2]: the TTL in milliseconds
	Hold  string // ARGV[3]: the reentrant hold's id (unused by acquire.lua)
	// Awaited (ARGV[4] '*') takes the lock already marked as awaited: the
	// caller has waited, and others may still wait.
	Awaited bool
	// Line, if not nil, is the caller's place in the line of waiting
	// clients: KEYS[3] and ARGV[5] to ARGV[8].
	Line *LinePlace
}

// A LinePlace is a client's place in a lock's line of waiting clients
// (see acquire.lua and dlock_join).
type LinePlace struct {
	Key        string // KEYS[3]: the waiting clients, a sorted set
	Client     string // ARGV[5]: the calling client's id in it
	Since      int64  // ARGV[6]: its score, when it began to wait
	LifeMillis int64  // ARGV[7]: how long its place is kept, in ms
	// OnWin (ARGV[8]) says what the client does in the line when the lock
	// is taken: "stay" (it has other waiters of the lock), "leave", or "".
	OnWin string
}

// Call returns the call of s, Acquire or ReentrantAcquire.
func (a AcquireCall) Call(s *Script) redisconn.Call {
	mark := ""
	if a.Awaited {
		mark = "*"
	}
	call := redisconn.Call{Script: s, Keys: []string{a.Lock, a.Fence}, Args: []string{a.Token, a.TTL, a.Hold, mark}}
	if l := a.Line; l != nil {
		call.Keys = append(call.Keys, l.Key)
		call.Args = append(call.Args, l.Client, strconv.FormatInt(l.Since, 10), strconv.FormatInt(l.LifeMillis, 10), l.OnWin)
	}
	return call
}

// ReleaseCall is a call of release.lua (Mutex, Redlock) or
// reentrant_release.lua (ReentrantMutex), which read the same keys and
// arguments: delete the lock if Token holds it (a reentrant owner's last
// hold), and wake waiters. The reply is 0 when Token held nothing here,
// else 1 (plus the number of subscribers woken, when the lock was
// deleted). Sent twice, the second run does nothing.
type ReleaseCall struct {
	Lock    string // KEYS[1]: the lock key
	Token   string // ARGV[1]: the owner token
	Channel string // ARGV[2]: the release channel
	// Hold (ARGV[3]) is the reentrant hold to give up; release.lua does
	// not read it. Empty with Waiting empty sends no ARGV[3].
	Hold string
	// Waiting (KEYS[2]) is the line of waiting clients, and Wake (ARGV[4])
	// the prefix of their own channels: the release then wakes the client
	// that has waited longest alone. Empty, it wakes every subscriber of
	// Channel.
	Waiting, Wake string
}

// Call returns the call of s, Release or ReentrantRelease.
func (r ReleaseCall) Call(s *Script) redisconn.Call {
	switch {
	case r.Waiting != "":
		return redisconn.Call{Script: s, Keys: []string{r.Lock, r.Waiting}, Args: []string{r.Token, r.Channel, r.Hold, r.Wake}}
	case r.Hold != "":
		return redisconn.Call{Script: s, Keys: []string{r.Lock}, Args: []string{r.Token, r.Channel, r.Hold}}
	}
	return redisconn.Call{Script: s, Keys: []string{r.Lock}, Args: []string{r.Token, r.Channel}}
}

// RefreshCall is a call of refresh.lua (Mutex, FairMutex),
// reentrant_refresh.lua (ReentrantMutex), quorum_refresh.lua (one Redlock
// node) or quorum_retake.lua (a Redlock node taken back), which read the
// lock key, the owner token and the TTL: extend the lock to a full TTL if
// Token holds it (quorum_retake: set it if it is absent). refresh.lua and
// reentrant_refresh.lua reply 1 when extended, 0 when Token holds nothing
// here; quorum_refresh.lua replies 1, 0 for another owner, -1 for an absent
// key; quorum_retake.lua replies 1 when it set the key.
type RefreshCall struct {
	Lock  string // KEYS[1]: the lock key
	Token string // ARGV[1]: the owner token
	TTL   string // ARGV[2]: the TTL in milliseconds
	// Deposed (KEYS[2]) is quorum_retake.lua's set of tokens that
	// ForceUnlock deposed; the other scripts take no KEYS[2].
	Deposed string
}

// Call returns the call of s: Refresh, ReentrantRefresh, QuorumRefresh or
// QuorumRetake.
func (r RefreshCall) Call(s *Script) redisconn.Call {
	keys := []string{r.Lock}
	if r.Deposed != "" {
		keys = append(keys, r.Deposed)
	}
	return redisconn.Call{Script: s, Keys: keys, Args: []string{r.Token, r.TTL}}
}

// QuorumAcquireCall is a call of quorum_acquire.lua: one node's part of a
// Redlock acquire. It takes the lock if it is free, draws the next value of
// the fence counter, and reports what the client needs to count the node's
// vote: {taken, fence, server time, uptime, epoch age, epoch} (see the
// script's header).
type QuorumAcquireCall struct {
	Lock  string // KEYS[1]: the lock key
	Fence string // KEYS[2]: the fence counter of the lock's slot
	Epoch string // KEYS[3]: the node's epoch hash (dlock:epoch)
	Token string // ARGV[1]: the owner token
	TTL   string // ARGV[2]: the TTL in milliseconds
	// Window (ARGV[3]) is the restart window in milliseconds, or "0" when
	// restart detection is off.
	Window string
	// Fresh (ARGV[4]) guesses that the slot has no counter on the node
	// yet: a node that may create it then does so at the lift in one
	// command (see the script's header).
	Fresh bool
}

// Call returns the call of QuorumAcquire.
func (a QuorumAcquireCall) Call() redisconn.Call {
	fresh := "0"
	if a.Fresh {
		fresh = "1"
	}
	return redisconn.Call{Script: QuorumAcquire, Keys: []string{a.Lock, a.Fence, a.Epoch},
		Args: []string{a.Token, a.TTL, a.Window, fresh}}
}

// QuorumFenceCall is a call of quorum_fence.lua: raise a node's fence
// counter to a Redlock grant's fence, only while the node still holds the
// grant's lock key. The reply is 1 when the key is Token's (the counter is
// then at least Fence), 0 when it is not.
type QuorumFenceCall struct {
	Lock    string // KEYS[1]: the lock key
	Counter string // KEYS[2]: the fence counter of the lock's slot
	Token   string // ARGV[1]: the owner token
	Fence   uint64 // ARGV[2]: the grant's fence
}

// Call returns the call of QuorumFence.
func (f QuorumFenceCall) Call() redisconn.Call {
	return redisconn.Call{Script: QuorumFence, Keys: []string{f.Lock, f.Counter}, Args: []string{f.Token, strconv.FormatUint(f.Fence, 10)}}
}

// JoinLineCall is a call of join_line.lua: put a client in a Mutex's line
// of waiting clients without trying to take the lock (a client that has
// just released the lock and woken another joins behind the line). The
// reply is the holder's remaining TTL in ms; -1 when the holder is already
// marked; 0 when the lock is free.
type JoinLineCall struct {
	Lock       string // KEYS[1]: the lock key
	Waiting    string // KEYS[2]: the waiting clients
	Client     string // ARGV[1]: the client's id
	Since      int64  // ARGV[2]: its score
	LifeMillis int64  // ARGV[3]: how long its place is kept, in ms
}

// Call returns the call of JoinLine.
func (j JoinLineCall) Call() redisconn.Call {
	return redisconn.Call{Script: JoinLine, Keys: []string{j.Lock, j.Waiting},
		Args: []string{j.Client, strconv.FormatInt(j.Since, 10), strconv.FormatInt(j.LifeMillis, 10)}}
}

// PassTurnCall is a call of pass_turn.lua: wake the next client in a
// Mutex's line, for a client that was woken but has no waiter left. The
// reply is the number of subscribers woken: 0 when the lock is held or the
// line is empty.
type PassTurnCall struct {
	Lock    string // KEYS[1]: the lock key
	Waiting string // KEYS[2]: the waiting clients
	Wake    string // ARGV[1]: the prefix of the clients' own channels
}

// Call returns the call of PassTurn.
func (p PassTurnCall) Call() redisconn.Call {
	return redisconn.Call{Script: PassTurn, Keys: []string{p.Lock, p.Waiting}, Args: []string{p.Wake}}
}

// LeaveLineCall is a call of leave_line.lua: take a client out of a
// Mutex's line of waiting clients. The reply is 1 if it was in the line,
// else 0.
type LeaveLineCall struct {
	Waiting string // KEYS[1]: the waiting clients
	Client  string // ARGV[1]: the client's id
}

// Call returns the call of LeaveLine.
func (l LeaveLineCall) Call() redisconn.Call {
	return redisconn.Call{Script: LeaveLine, Keys: []string{l.Waiting}, Args: []string{l.Client}}
}

// ElectPublishCall is a call of elect_publish.lua: record the leader of an
// election while it holds the election's lock, and publish the change.
// The reply is 1 when recorded and published, 0 when the lock is not
// Token's.
type ElectPublishCall struct {
	Lock    string // KEYS[1]: the election's lock key (a Mutex)
	Record  string // KEYS[2]: the leader record's key
	Token   string // ARGV[1]: the leader's token
	Value   string // ARGV[2]: the record
	TTL     string // ARGV[3]: the record's life in milliseconds
	Channel string // ARGV[4]: the change channel
}

// Call returns the call of ElectPublish.
func (e ElectPublishCall) Call() redisconn.Call {
	return redisconn.Call{Script: ElectPublish, Keys: []string{e.Lock, e.Record}, Args: []string{e.Token, e.Value, e.TTL, e.Channel}}
}

// ElectReadCall is a call of elect_read.lua: the record of an election's
// leader, with its lock's value. The reply is {lock value or false, record
// or false}; the record is the leader's only if its token is the lock's.
type ElectReadCall struct {
	Lock   string // KEYS[1]: the election's lock key
	Record string // KEYS[2]: the leader record's key
}

// Call returns the call of ElectRead.
func (e ElectReadCall) Call() redisconn.Call {
	return redisconn.Call{Script: ElectRead, Keys: []string{e.Lock, e.Record}}
}

// ElectWithdrawCall is a call of elect_withdraw.lua: delete a resigning
// leader's record, and tell observers. The reply is 1 if the record was
// deleted, 0 if it was another's or gone.
type ElectWithdrawCall struct {
	Record  string // KEYS[1]: the leader record's key
	Value   string // ARGV[1]: the record
	Channel string // ARGV[2]: the change channel
}

// Call returns the call of ElectWithdraw.
func (e ElectWithdrawCall) Call() redisconn.Call {
	return redisconn.Call{Script: ElectWithdraw, Keys: []string{e.Record}, Args: []string{e.Value, e.Channel}}
}
