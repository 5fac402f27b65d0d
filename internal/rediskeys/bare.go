package rediskeys

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The bare-key layout (redislock.WithBareKey, redlock.WithBareKey) locks
// the user's key itself, as bsm/redislock, redsync, redis-py's Lock and
// node-redlock do: SET key token NX PX ttl, compare-and-delete,
// compare-and-PEXPIRE. Everything else dlock keeps for such a lock lives
// under Prefix: the fence counter of the key's Cluster slot, and a release
// channel.

// BarePrefix starts the channel of a bare-key lock.
const BarePrefix = Prefix + "bare:"

// Bare returns the keys of the bare-key lock on key: Base is key itself;
// Fence the counter of the Cluster slot key hashes to (its {hash tag}, if
// it has one), so that the acquire script, which writes both, runs on one
// Cluster node; Channel the release channel.
func Bare(key string) Keys {
	return Keys{Base: key, Fence: fenceOfSlot(ClusterSlot(key)), Channel: BarePrefix + key + ":released"}
}

// ClusterSlot is the Redis Cluster hash slot of key: the CRC16 of its hash
// tag, the text between its first { and the next }, when that text is not
// empty; else of the whole key.
func ClusterSlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return Slot(key[i+1 : i+1+j])
		}
	}
	return Slot(key)
}

// fenceOfSlot returns the fence counter of slot s.
func fenceOfSlot(s uint16) string { return Prefix + "fence:{" + slotTag(s) + "}" }

// CheckBareKey returns an error, starting with pkg, naming what is wrong
// with a key for the bare-key layout, or nil. Braces are allowed (Redis
// Cluster reads them as the key's hash tag, and so does dlock); a key in
// dlock's own namespace is not.
func CheckBareKey(pkg, key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%s: WithBareKey: empty key", pkg)
	case strings.HasPrefix(key, Prefix):
		return fmt.Errorf("%s: WithBareKey: key %q starts with %q, dlock's own key space; a bare key is the key other libraries lock, such as \"orders:42\"", pkg, key, Prefix)
	case len(key) > MaxName:
		return fmt.Errorf("%s: WithBareKey: key is %d bytes long; the limit is %d", pkg, len(key), MaxName)
	case !utf8.ValidString(key):
		return fmt.Errorf("%s: WithBareKey: key %q is not valid UTF-8", pkg, key)
	}
	return nil
}
