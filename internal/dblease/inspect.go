package dblease

import (
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/election"
	"github.com/dlock-go/dlock/internal/lease"
)

// Info returns what Inspect reports of the lock called name, whose row
// holds token and fence, with left to run on the database's clock: free
// if token is empty or left is not positive, held otherwise. where says
// where a holder in session mode holds its session's lock, and is empty
// for one in lease mode.
func Info(name, token string, fence uint64, left time.Duration, where string) dlock.Info {
	info := dlock.Info{Name: name, Kind: dlock.KindFree, Fence: fence}
	if token == "" || left <= 0 {
		return info
	}
	info.Kind, info.TTL = dlock.KindMutex, left
	info.Holders = []dlock.Holder{{Owner: token, Label: lease.Label(token), Mode: dlock.ModeExclusive, Holds: 1, Fence: fence, Where: where}}
	return info
}

// Leader returns the leader's record of the election called name, of
// package pkg, as read from the database: rec, the record last
// published, and token, the owner token that holds the election's lock
// now. It reports false for none: nothing published, or the record of a
// deposed leader, whose token is not the holder's.
func Leader(pkg, name, token, rec string) (election.Record, bool, error) {
	if rec == "" {
		return election.Record{}, false, nil
	}
	r, err := election.Parse(rec)
	if err != nil {
		return election.Record{}, false, fmt.Errorf("%s: election %q: %w", pkg, name, err)
	}
	if r.Token != token {
		return election.Record{}, false, nil // the record of a deposed leader
	}
	return r, true, nil
}
