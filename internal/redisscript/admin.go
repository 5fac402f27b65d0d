package redisscript

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/rediskeys"
)

// Scripts for operators: inspection and forced release.
var (
	Inspect     = loadHolding("inspect.lua")
	ForceUnlock = New("force_unlock", wakePrologue+loadHolding("force_unlock.lua").Src)
)

// ParseInfo turns the reply of Inspect, run with InspectOf(name), into
// an Info.
func ParseInfo(name string, v any) (dlock.Info, error) {
	a, ok := v.([]any)
	if !ok || len(a) < 11 || len(a)%2 == 0 {
		return dlock.Info{}, fmt.Errorf("inspect %q: unexpected reply %v", name, v)
	}
	str := func(i int) string { s, _ := a[i].(string); return s }
	num := func(i int) int64 {
		switch x := a[i].(type) {
		case int64:
			return x
		case string:
			n, _ := strconv.ParseInt(x, 10, 64)
			return n
		}
		return 0
	}
	list := func(i int) []string {
		l, _ := a[i].([]any)
		out := make([]string, 0, len(l))
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	info := dlock.Info{Name: name, Waiters: int(num(3))}
	info.PermitLimit = int(num(5))
	info.Fence, _ = strconv.ParseUint(str(2), 10, 64)
	writer, readers, permits := str(6), list(9), list(10)
	holds := func(mode string, owners ...string) {
		for _, o := range owners {
			info.Holders = append(info.Holders, dlock.Holder{Owner: o, Label: lease.Label(o), Mode: mode, Holds: 1})
		}
	}
	switch lock := str(0); lock {
	case "Mutex", "FairMutex", "ReentrantMutex":
		info.Kind = dlock.KindMutex
		if lock == "FairMutex" {
			info.Kind = dlock.KindFairMutex
		}
		if lock == "ReentrantMutex" {
			info.Kind = dlock.KindReentrantMutex
		}
		for i := 11; i+1 < len(a); i += 2 {
			info.Holders = append(info.Holders, dlock.Holder{Owner: str(i), Label: lease.Label(str(i)), Mode: dlock.ModeExclusive, Holds: int(num(i + 1))})
		}
		if pttl := num(1); pttl > 0 {
			info.TTL = time.Duration(pttl) * time.Millisecond
		}
	case "RWMutex", "Semaphore", "":
		switch {
		case lock == "RWMutex" || writer != "" || len(readers) > 0:
			info.Kind = dlock.KindRWMutex
		case lock == "Semaphore" || len(permits) > 0:
			info.Kind = dlock.KindSemaphore
		default:
			info.Kind = dlock.KindFree
		}
		if writer != "" {
			holds(dlock.ModeWrite, writer)
			if pttl := num(7); pttl > 0 {
				info.TTL = time.Duration(pttl) * time.Millisecond
			}
		}
		holds(dlock.ModeRead, readers...)
		holds(dlock.ModePermit, permits...)
	default: // "Redis <type>": a key dlock did not write
		info.Kind = dlock.KindUnknown
		info.Detail = fmt.Sprintf("the key %s holds a %s that dlock did not write", rediskeys.For(name).Base, strings.TrimPrefix(lock, "Redis "))
	}
	return info, nil
}
