package zklock

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlock-go/dlock"
)

// maxPathLen bounds a lock path; ZooKeeper itself only bounds whole packets.
const maxPathLen = 1024

// checkPath returns an error naming what is wrong with a lock path, or nil
// if ZooKeeper will accept it and children can be created under it.
func checkPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("zklock: empty lock path; use an absolute path such as /locks/nightly-report")
	case p[0] != '/':
		return fmt.Errorf("zklock: lock path %q is not absolute; it must start with /", p)
	case p == "/":
		return fmt.Errorf("zklock: the root / cannot be a lock path; use a path of its own, such as /locks/name")
	case strings.HasSuffix(p, "/"):
		return fmt.Errorf("zklock: lock path %q ends with a slash; remove it", p)
	case len(p) > maxPathLen:
		return fmt.Errorf("zklock: lock path is %d bytes long; the limit is %d", len(p), maxPathLen)
	case p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/"):
		return fmt.Errorf("zklock: lock path %q is under /zookeeper, which ZooKeeper reserves for itself", p)
	case !utf8.ValidString(p):
		return fmt.Errorf("zklock: lock path %q is not valid UTF-8", p)
	}
	for _, seg := range strings.Split(p[1:], "/") {
		switch seg {
		case "":
			return fmt.Errorf("zklock: lock path %q has an empty segment (//)", p)
		case ".", "..":
			return fmt.Errorf("zklock: lock path %q has a relative segment %q; ZooKeeper paths are always absolute", p, seg)
		}
	}
	for i, r := range p {
		if illegal(r) {
			return fmt.Errorf("zklock: lock path %q has the character %U at byte %d, which ZooKeeper does not allow in a path", p, r, i)
		}
	}
	return nil
}

// illegal reports whether ZooKeeper refuses r in a path: control
// characters and the ranges its documentation reserves. ZooKeeper checks
// Java's UTF-16 characters, in which a character above U+FFFF (an emoji)
// is two surrogates, U+D800 to U+DFFF: refused too.
func illegal(r rune) bool {
	return r <= 0x1f || r >= 0x7f && r <= 0x9f || r >= 0xd800 && r <= 0xf8ff || r >= 0xfff0
}

// Node names. Every node dlock creates is named
//
//	_c_<32 hex digits>-<kind>-<10-digit sequence>
//
// The "_c_<guid>-" prefix is the protected-create convention of Curator
// and go-zookeeper: it lets a client whose create lost its reply find the
// node it made. The server appends the sequence. A Mutex's kind is "lock",
// as in Curator's InterProcessMutex and go-zookeeper's zk.Lock, so the
// three exclude each other on one path.
const (
	protectedPrefix = "_c_"
	seqDigits       = 10
)

// A kind is what a node says about its holder.
type kind int

const (
	kindLock   kind = iota // a Mutex holder or waiter
	kindRead               // an RWMutex reader
	kindWrite              // an RWMutex writer
	kindPermit             // a Semaphore lease or waiter
)

func (k kind) String() string {
	return [...]string{"Mutex", "RWMutex reader", "RWMutex writer", "Semaphore"}[k]
}

// label returns the part of a node name that names its kind; a permit's
// names its semaphore's number of permits too.
func label(k kind, permits int) string {
	switch k {
	case kindRead:
		return "read-"
	case kindWrite:
		return "write-"
	case kindPermit:
		return "permit" + strconv.Itoa(permits) + "-"
	}
	return "lock-"
}

// A child is one parsed node name under a lock path.
type child struct {
	name    string
	seq     int64
	kind    kind
	permits int // for kindPermit
}

// parseChild parses a node name, and reports false for a name that no
// dlock lock (nor Curator's or go-zookeeper's mutex) would have created.
func parseChild(name string) (child, bool) {
	if len(name) <= seqDigits {
		return child{}, false
	}
	rest, digits := name[:len(name)-seqDigits], name[len(name)-seqDigits:]
	seq, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || seq < 0 || strings.ContainsAny(digits, "+-") {
		return child{}, false
	}
	c := child{name: name, seq: seq}
	switch {
	case strings.HasSuffix(rest, "lock-"):
		c.kind = kindLock
	case strings.HasSuffix(rest, "read-"):
		c.kind = kindRead
	case strings.HasSuffix(rest, "write-"):
		c.kind = kindWrite
	default:
		i := strings.LastIndex(rest, "permit")
		if i < 0 || !strings.HasSuffix(rest, "-") {
			return child{}, false
		}
		n, err := strconv.Atoi(rest[i+len("permit") : len(rest)-1])
		if err != nil || n < 1 {
			return child{}, false
		}
		c.kind, c.permits = kindPermit, n
	}
	return c, true
}

// overflowed reports whether name ends with a negative sequence, as
// ZooKeeper appends once a parent's counter passes 2^31-1.
func overflowed(name string) bool {
	i := strings.LastIndex(name, "-")
	if i < 1 || name[i-1] != '-' {
		return false
	}
	_, err := strconv.ParseInt(name[i:], 10, 32)
	return err == nil
}

// parseChildren parses and sorts by sequence the children of dir, and
// returns an error naming the first one that belongs to no lock kind in
// allowed.
func parseChildren(dir string, names []string, allowed ...kind) ([]child, error) {
	kids := make([]child, 0, len(names))
	for _, name := range names {
		c, ok := parseChild(name)
		if !ok && overflowed(name) {
			return nil, fmt.Errorf("zklock: ZooKeeper's sequence counter for %s has overflowed (node %q); delete the path while no lock is held to start it again", dir, name)
		}
		if !ok {
			return nil, fmt.Errorf("zklock: %s holds the node %q, which is not a lock node; give the lock a path of its own", dir, name)
		}
		if !slices.Contains(allowed, c.kind) {
			return nil, fmt.Errorf("zklock: %s is used by a %s (node %q); one path serves one kind of lock: %w", dir, c.kind, name, dlock.ErrKindMismatch)
		}
		kids = append(kids, c)
	}
	slices.SortFunc(kids, func(a, b child) int { return cmp.Compare(a.seq, b.seq) })
	return kids, nil
}

// fenceOf returns the fence of the node with sequence seq under a parent
// created at ctime (milliseconds since the Unix epoch, on the ensemble
// leader's clock):
//
//	(ctime - fenceEpoch)·2^fenceSeqBits + seq
//
// See the package documentation for why it strictly increases across
// holders, even when the parent is deleted and created again or the
// ensemble loses its data, and stays below 2^53 until fenceHorizon. A
// parent created before fenceEpoch counts from it.
func fenceOf(parentCtime, seq int64) uint64 {
	return uint64(max(parentCtime-fenceEpoch, 0))<<fenceSeqBits + uint64(seq)
}

// fenceSeqBits is the room given to the sequence under one parent: a
// parent would need 2^fenceSeqBits (4096) child changes per millisecond of
// its life, 4 million a second, for the next parent's fences to fall
// behind; an ensemble commits a few tens of thousands of writes a second.
const fenceSeqBits = 12

// fenceEpoch is 2020-01-01T00:00:00Z in milliseconds since the Unix epoch:
// fences count parents' creation times from it, so that they stay below
// 2^53 (exact in JSON and JavaScript numbers) for 2^41 ms, about 69 years.
const fenceEpoch = 1_577_836_800_000

// fenceHorizon is when a parent's fences would reach 2^53: its creation
// time leaves room for a full 31-bit sequence below 2^53.
var fenceHorizon = time.UnixMilli(fenceEpoch + (1<<53-1<<31)>>fenceSeqBits).UTC()
