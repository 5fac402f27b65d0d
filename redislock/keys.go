package redislock

import (
	"fmt"
	"strings"
)

// keyPrefix starts every key and channel dlock writes.
const keyPrefix = "dlock:"

// keys are the Redis names of one lock. They share the hash tag {name}, so
// in a Cluster they live on one slot.
type keys struct {
	lock, fence, channel string
	kind                 string // which kind of lock uses the name (see redisscript.loadClaiming)
}

func keysFor(name string) keys {
	base := keyPrefix + "{" + name + "}"
	return keys{lock: base, fence: base + ":fence", channel: base + ":released", kind: base + ":kind"}
}

// checkName returns an error naming what is wrong with a lock name.
func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("redislock: empty lock name")
	case strings.ContainsAny(name, "{}"):
		return fmt.Errorf("redislock: lock name %q contains a brace; dlock wraps the name in its own {hash tag}", name)
	case len(name) > 4096:
		return fmt.Errorf("redislock: lock name is %d bytes long; the limit is 4096", len(name))
	}
	return nil
}
