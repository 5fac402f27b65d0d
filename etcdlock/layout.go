package etcdlock

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dlock-go/dlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A kind is what one key of a lock is: a Mutex's key, an RWMutex reader's
// or writer's, or a Semaphore permit's.
type kind uint8

const (
	kindMutex kind = iota + 1
	kindRead
	kindWrite
	kindPermit
	kindOther // under the prefix, but not a key a lock writes
)

// Every key of the lock called name lives under prefix(name), name + "/".
// The rest of the key says what it is, the etcd lease's ID in hex last:
//
//	name/<lease>               Mutex (the layout of concurrency.Mutex)
//	name/read/<lease>          RWMutex reader
//	name/write/<lease>         RWMutex writer
//	name/permits-<n>/<lease>   Semaphore of n permits
//
// Its value is the holder's owner token ("" for a concurrency.Mutex), or an
// election's candidate's campaign value (see NewElection).
func prefix(name string) string { return name + "/" }

// keyFor returns the key of the lock called name, of kind k (with n
// permits for a Semaphore), held by the etcd lease id.
func keyFor(name string, k kind, n int, id clientv3.LeaseID) string {
	hex := fmt.Sprintf("%x", int64(id))
	switch k {
	case kindRead:
		return prefix(name) + "read/" + hex
	case kindWrite:
		return prefix(name) + "write/" + hex
	case kindPermit:
		return prefix(name) + "permits-" + strconv.Itoa(n) + "/" + hex
	}
	return prefix(name) + hex
}

// parseKey tells what key, under the prefix of the lock called name, is;
// n is a permit key's number of permits.
func parseKey(name, key string) (k kind, n int) {
	rest, ok := strings.CutPrefix(key, prefix(name))
	if !ok {
		return kindOther, 0
	}
	dir, id, ok := strings.Cut(rest, "/")
	if !ok {
		id, dir = rest, ""
	}
	if _, err := strconv.ParseUint(id, 16, 64); err != nil || strings.Contains(id, "/") {
		return kindOther, 0
	}
	switch {
	case dir == "":
		return kindMutex, 0
	case dir == "read":
		return kindRead, 0
	case dir == "write":
		return kindWrite, 0
	case strings.HasPrefix(dir, "permits-"):
		n, err := strconv.Atoi(strings.TrimPrefix(dir, "permits-"))
		if err == nil && n > 0 {
			return kindPermit, n
		}
	}
	return kindOther, 0
}

// lockKind is the dlock.Kind of a lock whose first key is of kind k.
func (k kind) lockKind() dlock.Kind {
	switch k {
	case kindMutex:
		return dlock.KindMutex
	case kindRead, kindWrite:
		return dlock.KindRWMutex
	case kindPermit:
		return dlock.KindSemaphore
	}
	return dlock.KindUnknown
}

// String names the kind as the lock's events do.
func (k kind) String() string {
	switch k {
	case kindMutex:
		return "Mutex"
	case kindRead:
		return "RWMutex.read"
	case kindWrite:
		return "RWMutex.write"
	case kindPermit:
		return "Semaphore"
	}
	return "unknown"
}

// mode is the dlock.Holder mode of a key of kind k.
func (k kind) mode() string {
	switch k {
	case kindRead:
		return dlock.ModeRead
	case kindWrite:
		return dlock.ModeWrite
	case kindPermit:
		return dlock.ModePermit
	}
	return dlock.ModeExclusive
}

// checkName returns an error naming what is wrong with a lock name, or
// nil: as on every backend, a name is not empty and is valid UTF-8 (etcd
// itself takes any bytes, which the dlock command could then neither
// print nor pass back).
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("etcdlock: empty lock name")
	case !utf8.ValidString(name):
		return fmt.Errorf("etcdlock: lock name %q is not valid UTF-8", name)
	}
	// The keys of the lock "a/read" (a Mutex's "a/read/<lease>") have the
	// shape of a key of the lock "a" (an RWMutex reader's): the locks of
	// "a" would read them as their own, and ForceUnlock("a") delete them.
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		switch last := name[i+1:]; {
		case last == "", last == "read", last == "write", strings.HasPrefix(last, "permits-"):
			return fmt.Errorf("etcdlock: lock name %q: its last segment %q is that of a key of the lock %q (an RWMutex's read or write, a Semaphore's permits-N, a Mutex's empty one): rename it", name, last, name[:i])
		}
	}
	return nil
}
