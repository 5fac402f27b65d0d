package redislock

import "github.com/dlock-go/dlock/internal/rediskeys"

// keyPrefix starts every key and channel dlock writes.
const keyPrefix = rediskeys.Prefix

// keys are the Redis names of one lock (see package rediskeys).
type keys struct {
	lock, fence, channel string
}

func keysFor(name string) keys {
	k := rediskeys.For(name)
	return keys{lock: k.Base, fence: k.Fence, channel: k.Channel}
}

// checkName returns an error naming what is wrong with a lock name.
func checkName(name string) error { return rediskeys.CheckName("redislock", name) }
