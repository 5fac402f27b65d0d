package redisscript

import (
	"strconv"

	"github.com/dlock-go/dlock/internal/rediskeys"
	"github.com/dlock-go/dlock/redisconn"
)

// The typed calls of the scripts for operators; see calls.go.

// InspectCall is a call of inspect.lua: what an operator wants to know of
// one lock name, for every kind of lock (see ParseInfo). It reads only.
type InspectCall struct {
	Lock    string // KEYS[1]: the name's main key
	Fence   string // KEYS[2]: the fence counter of the name's slot
	Queue   string // KEYS[3]: a FairMutex's queue
	Permits string // KEYS[4]: a Semaphore's permits
	Limit   string // KEYS[5]: a Semaphore's number of permits
	Writer  string // KEYS[6]: an RWMutex's writer
	Readers string // KEYS[7]: an RWMutex's readers
	Intents string // KEYS[8]: an RWMutex's waiting writers' intents
	Waiting string // KEYS[9]: a Mutex's line of waiting clients
}

// InspectOf returns the call of Inspect for the lock called name.
func InspectOf(name string) InspectCall {
	k := rediskeys.For(name)
	b := k.Base
	return InspectCall{Lock: b, Fence: k.Fence, Queue: b + ":queue", Permits: b + ":permits", Limit: b + ":limit",
		Writer: b + ":writer", Readers: b + ":readers", Intents: b + ":wintent", Waiting: b + ":waiting"}
}

// Call returns the call of Inspect.
func (i InspectCall) Call() redisconn.Call {
	return redisconn.Call{Script: Inspect, Keys: []string{i.Lock, i.Fence, i.Queue, i.Permits, i.Limit, i.Writer, i.Readers, i.Intents, i.Waiting}}
}

// ForceUnlockCall is a call of force_unlock.lua, an operator's override:
// delete every holder of one lock name and wake waiters. The reply is the
// number of keys deleted. A main key that dlock did not write is left
// alone: WRONGTYPE.
type ForceUnlockCall struct {
	Lock     string // KEYS[1]: the name's main key
	Writer   string // KEYS[2]: an RWMutex's writer
	Readers  string // KEYS[3]: an RWMutex's readers
	Intents  string // KEYS[4]: an RWMutex's writer intents
	Permits  string // KEYS[5]: a Semaphore's permits
	Queue    string // KEYS[6]: a FairMutex's queue
	Waiting  string // KEYS[7]: a Mutex's line of waiting clients
	Channel  string // ARGV[1]: the release channel
	FairWake string // ARGV[2]: the prefix of a fair waiter's own channel
	Wake     string // ARGV[3]: the prefix of a waiting client's own channel
}

// ForceUnlockOf returns the call of ForceUnlock for the lock called name.
func ForceUnlockOf(name string) ForceUnlockCall {
	k := rediskeys.For(name)
	b := k.Base
	return ForceUnlockCall{Lock: b, Writer: b + ":writer", Readers: b + ":readers", Intents: b + ":wintent", Permits: b + ":permits",
		Queue: b + ":queue", Waiting: b + ":waiting", Channel: k.Channel, FairWake: b + ":w:", Wake: b + ":wake:"}
}

// Call returns the call of ForceUnlock.
func (f ForceUnlockCall) Call() redisconn.Call {
	return redisconn.Call{Script: ForceUnlock, Keys: []string{f.Lock, f.Writer, f.Readers, f.Intents, f.Permits, f.Queue, f.Waiting},
		Args: []string{f.Channel, f.FairWake, f.Wake}}
}

// QuorumForceCall is a call of quorum_force.lua, one node's part of the
// first round of a Redlock ForceUnlock: delete the lock key, whoever holds
// it, wake the waiters, and add the holder's token to the deposed tokens.
// The reply is {1 if a key was deleted else 0, the holder's token, the
// time the key had left in ms}.
type QuorumForceCall struct {
	Lock    string // KEYS[1]: the lock key
	Deposed string // KEYS[2]: the deposed tokens, a sorted set
	Channel string // ARGV[1]: the release channel
}

// Call returns the call of QuorumForce.
func (f QuorumForceCall) Call() redisconn.Call {
	return redisconn.Call{Script: QuorumForce, Keys: []string{f.Lock, f.Deposed}, Args: []string{f.Channel}}
}

// QuorumDeposeCall is a call of quorum_depose.lua, one node's part of the
// second round of a Redlock ForceUnlock: record every token deposed on any
// node, and delete the lock key if it holds one of them. The reply is 1 if
// the key was deleted, else 0.
type QuorumDeposeCall struct {
	Lock    string // KEYS[1]: the lock key
	Deposed string // KEYS[2]: the deposed tokens
	// LifeMillis (ARGV[1]) is how long the tokens are kept at least, in
	// milliseconds.
	LifeMillis int64
	Tokens     []string // ARGV[2...]: the tokens
}

// Call returns the call of QuorumDepose.
func (d QuorumDeposeCall) Call() redisconn.Call {
	return redisconn.Call{Script: QuorumDepose, Keys: []string{d.Lock, d.Deposed},
		Args: append([]string{strconv.FormatInt(d.LifeMillis, 10)}, d.Tokens...)}
}
