// Package zkpath holds the rules a ZooKeeper lock path must follow, shared
// by zklock and the dlock command, which checks a name before it connects.
package zkpath

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxLen bounds a lock path, in bytes; ZooKeeper itself only bounds whole
// packets.
const MaxLen = 1024

// Check returns what is wrong with the lock path p, phrased to follow the
// path's name in a sentence ("lock path /x " + reason), or "" if ZooKeeper
// will accept p and children can be created under it.
func Check(p string) (reason string) {
	switch {
	case p == "":
		return "is empty; use an absolute path such as /locks/nightly-report"
	case p[0] != '/':
		return "is not absolute; it must start with /"
	case p == "/":
		return "is the root /, which cannot be a lock; use a path of its own, such as /locks/nightly-report"
	case strings.HasSuffix(p, "/"):
		return "ends with a slash; remove it"
	case len(p) > MaxLen:
		return fmt.Sprintf("is too long: %d bytes, and the limit is %d", len(p), MaxLen)
	case p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/"):
		return "is under /zookeeper, which ZooKeeper reserves for itself; use another path"
	case !utf8.ValidString(p):
		return "is not valid UTF-8"
	}
	for _, seg := range strings.Split(p[1:], "/") {
		switch seg {
		case "":
			return "has an empty path segment; remove the extra slash"
		case ".", "..":
			return fmt.Sprintf("has a path segment %q, which ZooKeeper does not allow: paths are always absolute", seg)
		}
	}
	for _, r := range p {
		if illegal(r) {
			return fmt.Sprintf("has the character %U, which ZooKeeper does not allow in a path (no emoji, control or private-use characters)", r)
		}
	}
	return ""
}

// illegal reports whether ZooKeeper refuses r in a path: control
// characters and the ranges its documentation reserves. ZooKeeper checks
// Java's UTF-16 characters, in which a character above U+FFFF (an emoji)
// is two surrogates, U+D800 to U+DFFF: refused too.
func illegal(r rune) bool {
	return r <= 0x1f || r >= 0x7f && r <= 0x9f || r >= 0xd800 && r <= 0xf8ff || r >= 0xfff0
}
