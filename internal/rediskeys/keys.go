// Package rediskeys is the key layout dlock writes on Redis, shared by
// redislock and redlock so that both, and the dlock command's inspect and
// release, read and write the same keys for one lock name.
package rediskeys

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Prefix starts every key and channel dlock writes.
const Prefix = "dlock:"

// Keys are the Redis names of one lock. They share the hash slot of
// {name}, so in a Cluster they live on one node: the lock's own keys carry
// the hash tag {name}, and the fence counter a tag of its own that hashes
// to the same slot (see FenceKey).
type Keys struct {
	// Base is dlock:{name}: the lock's main key, which other keys of the
	// name extend (Base + ":queue", …).
	Base string
	// Fence is the fence counter of the name's slot.
	Fence string
	// Channel carries the release notices of the name.
	Channel string
}

// For returns the keys of the lock called name.
func For(name string) Keys {
	base := Prefix + "{" + name + "}"
	return Keys{Base: base, Fence: FenceKey(name), Channel: base + ":released"}
}

// MaxName is the longest lock name, in bytes.
const MaxName = 4096

// CheckName returns an error, starting with pkg, naming what is wrong with
// a lock name, or nil.
func CheckName(pkg, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s: empty lock name", pkg)
	case strings.ContainsAny(name, "{}"):
		return fmt.Errorf("%s: lock name %q contains a brace; dlock wraps the name in its own {hash tag}", pkg, name)
	case len(name) > MaxName:
		return fmt.Errorf("%s: lock name is %d bytes long; the limit is %d", pkg, len(name), MaxName)
	case !utf8.ValidString(name):
		return fmt.Errorf("%s: lock name %q is not valid UTF-8", pkg, name)
	}
	return nil
}
