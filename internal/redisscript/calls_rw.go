package redisscript

import "github.com/dlock-go/dlock/redisconn"

// The typed calls of an RWMutex's scripts; see calls.go.

// RWAcquireCall is a call of rw_read_acquire.lua (a read share) or, with
// Write set, rw_write_acquire.lua (the write lock), which read the same
// keys. A read share is taken unless a writer holds the lock or has
// announced its intent; the write lock if no writer and no live reader
// holds it, and otherwise a waiting writer announces its intent. The reply
// is the new fence (> 0) when taken, or minus the time in milliseconds
// after which trying again makes sense (<= 0).
type RWAcquireCall struct {
	Main    string // KEYS[1]: the name's main key, the marker =RWMutex
	Writer  string // KEYS[2]: the writer key
	Readers string // KEYS[3]: the readers, a sorted set
	Intents string // KEYS[4]: the writer intents, a sorted set
	Fence   string // KEYS[5]: the fence counter of the lock's slot
	Token   string // ARGV[1]: the reader's or writer's token
	TTL     string // ARGV[2]: the TTL in milliseconds
	// Write, if not nil, makes the call one of rw_write_acquire.lua, and
	// gives its ARGV[3] to ARGV[5].
	Write *RWWriter
}

// An RWWriter is what rw_write_acquire.lua reads of a writer beyond its
// token and TTL.
type RWWriter struct {
	// IntentLife (ARGV[3]) is the intent's lifetime in milliseconds; "0"
	// announces nothing (TryLock).
	IntentLife string
	Intent     string // ARGV[4]: the waiting writer's intent id
	// Owner (ARGV[5]) is the caller's owner token, or empty: if it holds a
	// read share, the call fails with DLOCKUPGRADE.
	Owner string
}

// Call returns the call of RWReadAcquire, or RWWriteAcquire with Write set.
func (a RWAcquireCall) Call() redisconn.Call {
	keys := []string{a.Main, a.Writer, a.Readers, a.Intents, a.Fence}
	if w := a.Write; w != nil {
		return redisconn.Call{Script: RWWriteAcquire, Keys: keys, Args: []string{a.Token, a.TTL, w.IntentLife, w.Intent, w.Owner}}
	}
	return redisconn.Call{Script: RWReadAcquire, Keys: keys, Args: []string{a.Token, a.TTL}}
}

// rwSide is the argument that tells rw_release.lua and rw_refresh.lua
// which side a token holds.
func rwSide(read bool) string {
	if read {
		return "r"
	}
	return "w"
}

// RWReleaseCall is a call of rw_release.lua: give up the write lock or a
// read share (Read), wake waiters when the lock became free, and delete
// the name's marker with the last hold. The reply is 1 plus the number of
// subscribers woken when given up, 0 when it had expired or was never
// held.
type RWReleaseCall struct {
	Writer  string // KEYS[1]: the writer key
	Readers string // KEYS[2]: the readers
	Main    string // KEYS[3]: the name's main key
	Token   string // ARGV[1]: the token
	Channel string // ARGV[2]: the release channel
	Read    bool   // ARGV[3]: 'r' for a read share, 'w' for the write lock
}

// Call returns the call of RWRelease.
func (r RWReleaseCall) Call() redisconn.Call {
	return redisconn.Call{Script: RWRelease, Keys: []string{r.Writer, r.Readers, r.Main}, Args: []string{r.Token, r.Channel, rwSide(r.Read)}}
}

// RWRefreshCall is a call of rw_refresh.lua: extend the write lock or a
// read share (Read) to a full TTL if it is still held, and the name's
// marker with it. The reply is 1 when extended, else 0 (the hold expired,
// or the marker went behind the lock's back).
type RWRefreshCall struct {
	Writer  string // KEYS[1]: the writer key
	Readers string // KEYS[2]: the readers
	Main    string // KEYS[3]: the name's main key
	Token   string // ARGV[1]: the token
	TTL     string // ARGV[2]: the TTL in milliseconds
	Read    bool   // ARGV[3]: 'r' for a read share, 'w' for the write lock
}

// Call returns the call of RWRefresh.
func (r RWRefreshCall) Call() redisconn.Call {
	return redisconn.Call{Script: RWRefresh, Keys: []string{r.Writer, r.Readers, r.Main}, Args: []string{r.Token, r.TTL, rwSide(r.Read)}}
}

// RWDowngradeCall is a call of rw_downgrade.lua: turn a held write lock
// into a read share in one step, and wake waiting readers. The reply is
// the read share's new fence (> 0), or 0 when the writer no longer holds
// the lock.
type RWDowngradeCall struct {
	Writer  string // KEYS[1]: the writer key
	Readers string // KEYS[2]: the readers
	Fence   string // KEYS[3]: the fence counter of the lock's slot
	Main    string // KEYS[4]: the name's main key
	Token   string // ARGV[1]: the writer's token
	Reader  string // ARGV[2]: the new read share's token
	TTL     string // ARGV[3]: the TTL in milliseconds
	Channel string // ARGV[4]: the release channel
}

// Call returns the call of RWDowngrade.
func (d RWDowngradeCall) Call() redisconn.Call {
	return redisconn.Call{Script: RWDowngrade, Keys: []string{d.Writer, d.Readers, d.Fence, d.Main}, Args: []string{d.Token, d.Reader, d.TTL, d.Channel}}
}

// RWWithdrawCall is a call of rw_withdraw.lua: withdraw a waiting
// writer's intent when it gives up, waking the readers it held back. The
// reply is 1 if the intent was there, else 0.
type RWWithdrawCall struct {
	Intents string // KEYS[1]: the writer intents
	Intent  string // ARGV[1]: the intent id
	Channel string // ARGV[2]: the release channel
}

// Call returns the call of RWWithdraw.
func (w RWWithdrawCall) Call() redisconn.Call {
	return redisconn.Call{Script: RWWithdraw, Keys: []string{w.Intents}, Args: []string{w.Intent, w.Channel}}
}
