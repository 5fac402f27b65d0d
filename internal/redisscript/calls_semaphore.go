package redisscript

import (
	"strconv"

	"github.com/dlock-go/dlock/redisconn"
)

// The typed calls of a semaphore's scripts; see calls.go.

// SemaphoreAcquireCall is a call of semaphore_acquire.lua: take one
// permit if one is free, and draw a fence. Expired permits are removed
// first. The reply is the new fence (> 0) when a permit was taken, or
// minus the milliseconds until the earliest permit expires (<= 0).
type SemaphoreAcquireCall struct {
	Permits string // KEYS[1]: the permits, a sorted set token -> expiry
	Limit   string // KEYS[2]: the number of permits
	Fence   string // KEYS[3]: the fence counter of the lock's slot
	Main    string // KEYS[4]: the name's main key, the marker =Semaphore
	Token   string // ARGV[1]: the permit's token
	TTL     string // ARGV[2]: the TTL in milliseconds
	// Default (ARGV[3]) is the number of permits the caller was configured
	// with: used, and stored, when Limit does not exist.
	Default int
}

// Call returns the call of SemaphoreAcquire.
func (a SemaphoreAcquireCall) Call() redisconn.Call {
	return redisconn.Call{Script: SemaphoreAcquire, Keys: []string{a.Permits, a.Limit, a.Fence, a.Main},
		Args: []string{a.Token, a.TTL, strconv.Itoa(a.Default)}}
}

// SemaphoreReleaseCall is a call of semaphore_release.lua: give a permit
// back and wake waiters; the name's marker goes with the last live permit.
// The reply is 0 when Token holds no live permit, else 1 plus the number
// of subscribers woken.
type SemaphoreReleaseCall struct {
	Permits string // KEYS[1]: the permits
	Limit   string // KEYS[2]: the number of permits
	Main    string // KEYS[3]: the name's main key
	Token   string // ARGV[1]: the permit's token
	Channel string // ARGV[2]: the release channel
}

// Call returns the call of SemaphoreRelease.
func (r SemaphoreReleaseCall) Call() redisconn.Call {
	return redisconn.Call{Script: SemaphoreRelease, Keys: []string{r.Permits, r.Limit, r.Main}, Args: []string{r.Token, r.Channel}}
}

// SemaphoreRefreshCall is a call of semaphore_refresh.lua: extend a permit
// to a full TTL if its holder still has it. The reply is 1 when extended,
// else 0 (the permit is gone or expired, or the marker went behind the
// semaphore's back).
type SemaphoreRefreshCall struct {
	Permits string // KEYS[1]: the permits
	Limit   string // KEYS[2]: the number of permits
	Main    string // KEYS[3]: the name's main key
	Token   string // ARGV[1]: the permit's token
	TTL     string // ARGV[2]: the TTL in milliseconds
}

// Call returns the call of SemaphoreRefresh.
func (r SemaphoreRefreshCall) Call() redisconn.Call {
	return redisconn.Call{Script: SemaphoreRefresh, Keys: []string{r.Permits, r.Limit, r.Main}, Args: []string{r.Token, r.TTL}}
}

// SemaphoreLimitCall is a call of semaphore_limit.lua: set or change the
// number of permits, and wake waiters when it grows. The reply is the new
// limit; a result below 1 is refused with DLOCKLIMIT. The outcome is
// recorded under Record, so that the request, sent again, changes nothing
// and gets the same reply.
type SemaphoreLimitCall struct {
	Permits string // KEYS[1]: the permits
	Limit   string // KEYS[2]: the number of permits
	Record  string // KEYS[3]: this request's record
	Add     bool   // ARGV[1]: 'add' N to the limit, else 'set' it to N
	N       int    // ARGV[2]: the new limit, or the change
	Default int    // ARGV[3]: the configured permits, the limit when Limit does not exist
	Channel string // ARGV[4]: the release channel
	TTL     string // ARGV[5]: the semaphore's TTL in milliseconds
	// RecordLife (ARGV[6]) is how long the record is kept, in
	// milliseconds.
	RecordLife string
}

// Call returns the call of SemaphoreLimit.
func (l SemaphoreLimitCall) Call() redisconn.Call {
	mode := "set"
	if l.Add {
		mode = "add"
	}
	return redisconn.Call{Script: SemaphoreLimit, Keys: []string{l.Permits, l.Limit, l.Record},
		Args: []string{mode, strconv.Itoa(l.N), strconv.Itoa(l.Default), l.Channel, l.TTL, l.RecordLife}}
}

// SemaphoreAvailableCall is a call of semaphore_available.lua: the number
// of free permits, the limit less the permits that have not expired
// (negative when the limit was lowered below the permits held). It writes
// nothing.
type SemaphoreAvailableCall struct {
	Permits string // KEYS[1]: the permits
	Limit   string // KEYS[2]: the number of permits
	Default int    // ARGV[1]: the configured permits, the limit when Limit does not exist
}

// Call returns the call of SemaphoreAvailable.
func (a SemaphoreAvailableCall) Call() redisconn.Call {
	return redisconn.Call{Script: SemaphoreAvailable, Keys: []string{a.Permits, a.Limit}, Args: []string{strconv.Itoa(a.Default)}}
}
