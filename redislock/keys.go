package redislock

import "github.com/dlock-go/dlock/internal/rediskeys"

// keyPrefix starts every key and channel dlock writes.
const keyPrefix = rediskeys.Prefix

// keys are the Redis names of one lock (see package rediskeys).
type keys struct {
	lock, fence, channel string
	// waiting is a Mutex's line of waiting clients (see acquire.lua), and
	// wake + a client's id the channel on which a release tells that
	// client it is its turn.
	waiting, wake string
}

func keysFor(name string) keys {
	k := rediskeys.For(name)
	return keys{lock: k.Base, fence: k.Fence, channel: k.Channel, waiting: k.Base + ":waiting", wake: k.Base + ":wake:"}
}

// bareKeysFor returns the keys of the lock on the bare key name (see
// WithBareKey): no line of waiting clients, whose release would need
// their key in name's slot and a mark on the holder's value.
func bareKeysFor(name string) keys {
	k := rediskeys.Bare(name)
	return keys{lock: k.Base, fence: k.Fence, channel: k.Channel}
}

// checkName returns an error naming what is wrong with a lock name.
func checkName(name string) error { return rediskeys.CheckName("redislock", name) }
