package zklock

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/internal/zkpath"
)

// checkPath returns an error naming what is wrong with a lock path, or nil
// if ZooKeeper will accept it and children can be created under it.
func checkPath(p string) error {
	if reason := zkpath.Check(p); reason != "" {
		if len(p) > zkpath.MaxLen {
			return fmt.Errorf("zklock: lock path (%d bytes) %s", len(p), reason)
		}
		return fmt.Errorf("zklock: lock path %q %s", p, reason)
	}
	// The lock /a and the lock /a/b are two locks: the nodes of /a are its
	// children named as parseChild reads them, and /a/b, a child of
	// another name, is left out. A segment named like a lock's node would
	// be read as one of its parent's holders.
	for _, seg := range strings.Split(p[1:], "/") {
		if _, ok := parseChild(seg); ok || overflowed(seg) || latchNode(seg) {
			return fmt.Errorf("zklock: lock path %q has the segment %q, named as a lock's node is: the lock on the path above it would read it as a holder; rename the segment", p, seg)
		}
	}
	return nil
}

// Node names. Every node dlock creates is named
//
//	_c_<32 hex digits>-<kind>-<10-digit sequence>
//
// The "_c_<guid>-" prefix is the protected-create convention of Curator
// and go-zookeeper: it lets a client whose create lost its reply find the
// node it made. The server appends the sequence. A Mutex's kind is "lock-",
// as in Curator's InterProcessMutex and go-zookeeper's zk.Lock, so the
// three exclude each other on one path; an RWMutex's reader and writer are
// "__READ__" and "__WRIT__", as in Curator's InterProcessReadWriteLock.
// Readers and writers of earlier zklock versions were "read-" and "write-":
// they are still read as such (Curator sorts them after its own nodes, so
// only zklock waits for them).
const (
	protectedPrefix = "_c_"
	seqDigits       = 10
	curatorRead     = "__READ__" // InterProcessReadWriteLock's READ_LOCK_NAME
	curatorWrite    = "__WRIT__" // and WRITE_LOCK_NAME
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
		return curatorRead
	case kindWrite:
		return curatorWrite
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
	case strings.HasSuffix(rest, curatorRead), strings.HasSuffix(rest, "read-"):
		c.kind = kindRead
	case strings.HasSuffix(rest, curatorWrite), strings.HasSuffix(rest, "write-"):
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

// latchNode reports whether name is a node of Curator's LeaderLatch
// ("latch-" and a sequence): it holds the path for its latch, but sorts
// apart from every lock node (see the package doc), so a lock meeting one
// fails naming it rather than leaving it out as another lock's path.
func latchNode(name string) bool {
	if len(name) <= seqDigits {
		return false
	}
	rest, digits := name[:len(name)-seqDigits], name[len(name)-seqDigits:]
	_, err := strconv.ParseUint(digits, 10, 63)
	return err == nil && !strings.ContainsAny(digits, "+-") && strings.HasSuffix(rest, "latch-")
}

// overflowed reports whether name is a lock node's with a negative
// sequence, as ZooKeeper appends once a parent's counter passes 2^31-1
// ("%010d": "-000000001" to "-2147483648"). Only a name that is a lock
// node's with its sequence so written counts: another child ("release--2024",
// the path of the lock "a/release--2024" beside "a") holds nothing.
func overflowed(name string) bool {
	i := strings.LastIndex(name, "-")
	if i < 1 || len(name)-i < seqDigits || len(name)-i > seqDigits+1 {
		return false
	}
	if n, err := strconv.ParseInt(name[i:], 10, 32); err != nil || n >= 0 {
		return false
	}
	_, ok := parseChild(name[:i] + strings.Repeat("0", seqDigits))
	return ok
}

// parseChildren parses and sorts by sequence the children of dir. A child
// that no lock made is left out: it is the path of another lock (dir/b,
// the lock "a/b" beside the lock "a"), or a node of the user's, and holds
// nothing, as Curator's lock recipes leave it out. A child whose sequence
// has overflowed is an error naming it.
func parseChildren(dir string, names []string) ([]child, error) {
	kids := make([]child, 0, len(names))
	for _, name := range names {
		if name == curatorLocks || name == curatorLeases {
			continue // a Semaphore's, of Curator's layout: see Semaphore
		}
		c, ok := parseChild(name)
		if !ok && overflowed(name) {
			return nil, fmt.Errorf("zklock: ZooKeeper's sequence counter for %s has overflowed (node %q); delete the path while no lock is held to start it again", dir, name)
		}
		if !ok && latchNode(name) {
			return nil, fmt.Errorf("zklock: %s holds the node %q, a Curator LeaderLatch's, which does not share zklock's layout; give the lock a path of its own", dir, name)
		}
		if ok {
			kids = append(kids, c)
		}
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
// See "Why fences strictly increase" under zklock in docs/ARCHITECTURE.md
// for why it strictly increases across holders, even when the parent is
// deleted and created again or the ensemble loses its data, and stays
// below 2^53 until fenceHorizon. A parent created before fenceEpoch counts
// from it.
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
