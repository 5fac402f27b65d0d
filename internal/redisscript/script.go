// Package redisscript holds the Lua scripts dlock runs on Redis, shared by
// redislock (one deployment) and redlock (a quorum of masters), and the
// explanation of the server errors they can meet.
package redisscript

import (
	"crypto/tls"
	"crypto/x509"
	"embed"
	"errors"
	"fmt"
	"net"
	"path"
	"slices"
	"strings"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redisconn"
)

// A Script is a Lua script with its SHA-1 digest (defined in package
// redisconn, where a user writing a Conn sees it).
type Script = redisconn.Script

// New returns a Script for src.
func New(name, src string) *Script { return redisconn.NewScript(name, src) }

//go:embed lua/*.lua
var files embed.FS

func load(name string) *Script {
	src, err := files.ReadFile(path.Join("lua", name))
	if err != nil {
		panic("redisscript: missing embedded script " + name) // a build defect, not an input
	}
	return New(strings.TrimSuffix(name, ".lua"), string(src))
}

// holderPrologue runs before every script that takes a lock. One lock
// name serves one kind of lock at a time: while any kind holds a name, its
// main key dlock:{name} exists, and tells the kind. A Mutex's is the
// holder's token; a FairMutex's starts with "=FairMutex="; a
// ReentrantMutex's is a hash; an RWMutex or a Semaphore keeps a marker
// there, "=RWMutex" or "=Semaphore", that lives as long as its holds. The
// key goes with the last hold, so a name binds no kind beyond the life of
// its locks.
//
// dlock_holder(key) returns the kind of lock holding key, or nil when it is
// free; dlock_refuse(holder) the error reply for a kind that may not share
// the name while holder holds it.
const holderPrologue = `local function dlock_holder(key)
  local t = redis.call('TYPE', key)['ok']
  if t == 'none' then return nil end
  if t == 'hash' then
    if redis.call('HEXISTS', key, 'fence') == 1 then return 'ReentrantMutex' end
    return 'Redis hash'
  end
  if t ~= 'string' then return 'Redis ' .. t end
  local v = redis.call('GETRANGE', key, 0, 63) -- the kind is at the start; the value may be huge
  if string.sub(v, 1, 1) ~= '=' then return 'Mutex' end
  local e = string.find(v, '=', 2, true)
  if e then return string.sub(v, 2, e - 1) end
  return string.sub(v, 2)
end
local function dlock_refuse(holder)
  if string.sub(holder, 1, 6) == 'Redis ' then
    return redis.error_reply('WRONGTYPE the lock key holds a ' .. string.sub(holder, 7) .. ' that dlock did not write')
  end
  return redis.error_reply('DLOCKKIND the name is held by a ' .. holder)
end
`

// linePrologue runs before the scripts that put a client in a Mutex's
// line of waiting clients (see acquire.lua): dlock_join(line, id, since,
// life) puts id in the line at since (or keeps the place it has), and
// keeps the line for at least life ms. A join only ever makes the line
// last longer, never shorter: the line lasts as long as the longest-lived
// place in it, and no client can shorten another's. (A place that
// outlives its client is passed over when its turn comes: its client no
// longer listens, or, woken with no waiter left, passes the turn on.)
const linePrologue = `local function dlock_join(line, id, since, life)
  redis.call('ZADD', line, 'NX', since, id)
  if redis.call('PTTL', line) < tonumber(life) then
    redis.call('PEXPIRE', line, life)
  end
end
`

// wakePrologue runs before the scripts that hand a free Mutex to its line
// of waiting clients (see acquire.lua): dlock_wake_next(line, prefix) pops
// the client that has waited longest and publishes on its own channel,
// prefix .. its id, passing over up to three that no longer listen. It
// returns the number of subscribers woken, 0 if none was.
const wakePrologue = `local function dlock_wake_next(line, prefix)
  for _ = 1, 3 do
    local next = redis.call('ZPOPMIN', line)
    if not next[1] then return 0 end
    local n = redis.call('PUBLISH', prefix .. next[1], 'released')
    if n > 0 then return n end
  end
  return 0
end
`

// loadWaking loads a script behind wakePrologue.
func loadWaking(name string) *Script {
	s := load(name)
	return New(s.Name, wakePrologue+s.Src)
}

// loadLined loads a script behind linePrologue (and, if holding,
// holderPrologue).
func loadLined(name string, holding bool) *Script {
	s := load(name)
	if holding {
		return New(s.Name, holderPrologue+linePrologue+s.Src)
	}
	return New(s.Name, linePrologue+s.Src)
}

// loadHolding loads a script behind holderPrologue.
func loadHolding(name string) *Script {
	s := load(name)
	return New(s.Name, holderPrologue+s.Src)
}

// WaiterMark is what an acquire that finds a Mutex held appends to the
// holder's value, so that its release wakes the waiting (see acquire.lua):
// a control character, which no token holds (dlock.WithLabel replaces a
// label's), so that no label looks like it.
const WaiterMark = "\x01"

// The scripts. Each file's header lists its KEYS and ARGV; those loaded
// with loadHolding may call the functions of holderPrologue. The typed
// calls of calls.go and calls_*.go build the KEYS and ARGV of each from
// named fields.
var (
	Acquire       = loadLined("acquire.lua", false)
	Release       = loadWaking("release.lua")
	Refresh       = load("refresh.lua")
	QuorumAcquire = load("quorum_acquire.lua")
	LeaveLine     = load("leave_line.lua")
	JoinLine      = loadLined("join_line.lua", false)
	PassTurn      = loadWaking("pass_turn.lua")

	ReentrantAcquire = loadLined("reentrant_acquire.lua", true)
	ReentrantRelease = loadWaking("reentrant_release.lua")
	ReentrantRefresh = load("reentrant_refresh.lua")
	QuorumFence      = load("quorum_fence.lua")
	QuorumRefresh    = load("quorum_refresh.lua")
	QuorumRetake     = load("quorum_retake.lua")
	QuorumForce      = load("quorum_force.lua")
	QuorumDepose     = load("quorum_depose.lua")

	// The bare-key layout (rediskeys.Bare): its refresh is Refresh
	// (redislock) or QuorumRefresh (redlock), which read a plain token.
	BareAcquire = load("bare_acquire.lua")
	BareRelease = load("bare_release.lua")
)

// A ReplyError is an error reply from the server, as opposed to a failure
// to reach it.
type ReplyError = redisconn.ReplyError

// IsReply reports whether err is an error reply from the server.
func IsReply(err error) bool {
	var re *ReplyError
	return errors.As(err, &re)
}

// Unsent reports whether err proves that a call never reached the server:
// no connection could be made. Scripts are never retried by a transport,
// so a dial error means the script did not run.
func Unsent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Describe turns the failure of script s on key into an error that names
// the problem and its fix. pkg prefixes the message ("redislock").
func Describe(pkg, key string, s *Script, err error) error {
	var re *ReplyError
	if !errors.As(err, &re) {
		return fmt.Errorf("%s: %s on %q: %w", pkg, s.Name, key, err)
	}
	msg := re.Msg
	switch {
	case strings.Contains(msg, "WRONGTYPE"):
		return fmt.Errorf("%s: key %q holds a value of another Redis type (WRONGTYPE): another kind of dlock lock, or something else, uses this name; pick another lock name or delete the key: %w", pkg, key, err)
	case strings.Contains(msg, "DLOCKNOTTL"):
		return fmt.Errorf("%s: key %q exists without an expiry, so it was not set by dlock; pick another lock name or delete the key: %w", pkg, key, err)
	case strings.Contains(msg, "DLOCKKIND"):
		holder := msg[strings.Index(msg, "held by a ")+len("held by a "):]
		// Not obtained, and Lock does not wait for it: see
		// dlock.ErrKindMismatch.
		return dlock.NotObtained(fmt.Errorf("%s: %s%q is held by a %s; one name serves one kind of lock at a time, so try again once it is free or pick another name: %w", pkg, asking(s), key, holder, dlock.ErrKindMismatch))
	case strings.Contains(msg, "DLOCKFENCE"):
		return fmt.Errorf("%s: the fence counter of %q does not hold a number; something other than dlock wrote it: %w", pkg, key, err)
	case clusterBusy(msg):
		return fmt.Errorf("%s: the Redis Cluster is moving the slot of %q to another node, or failing it over (%s); the %s did not run: %w",
			pkg, key, msg, strings.TrimSuffix(s.Name, ".lua"), err)
	case strings.Contains(msg, "NOPERM") || strings.Contains(msg, "unknown command") ||
		strings.Contains(msg, "NOSCRIPT") || strings.Contains(msg, "scripting"):
		return fmt.Errorf("%s: the server refused to run a Lua script (%s); dlock needs EVALSHA and EVAL to be allowed: %w", pkg, msg, err)
	}
	return fmt.Errorf("%s: %s on %q: server replied: %w", pkg, s.Name, key, err)
}

// clusterBusy reports whether a reply says that a Redis Cluster did not
// run a command because the command's slot is moving between nodes
// (TRYAGAIN, or a redirect the client did not follow) or has no master
// that can serve it (CLUSTERDOWN): the command may be sent again.
func clusterBusy(msg string) bool {
	for _, p := range []string{"TRYAGAIN", "MOVED ", "ASK ", "CLUSTERDOWN"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// passing are the prefixes of the error replies of a server that cannot
// serve a call for a while, and did not run it: loading its data (LOADING),
// running a long script (BUSY), a Cluster moving a slot or without a master
// for it (TRYAGAIN, MOVED, ASK, CLUSTERDOWN), a replica whose master is
// down or a master without the replicas it requires (MASTERDOWN,
// NOREPLICAS), a master demoted by a failover (READONLY), or a server that
// refuses writes until its disk or memory frees up (MISCONF, OOM).
var passing = []string{"LOADING", "BUSY ", "TRYAGAIN", "MOVED ", "ASK ", "CLUSTERDOWN", "MASTERDOWN",
	"NOREPLICAS", "READONLY", "MISCONF", "OOM "}

// Transient reports whether err, the failure of a call, is one that
// waiting can heal: the server could not be reached or did not answer
// (a refused, reset or timed-out connection, a connection lost), or
// answered that it cannot serve the call for a while (see passing). What
// waiting cannot heal is not: every other error reply (a refused login or
// permission, a key of another type, a script error), a Redis client that
// was closed or never given (redisconn.ErrUnusable), and a TLS handshake that failed
// on the certificates or met a server that does not speak TLS.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var re *ReplyError
	if errors.As(err, &re) {
		for _, p := range passing {
			if strings.HasPrefix(re.Msg, p) {
				return true
			}
		}
		return false
	}
	return !errors.Is(err, redisconn.ErrUnusable) && !BadTLS(err)
}

// TurnedAway reports whether err is the reply of a server that cannot
// serve calls for a while (see passing): the call did not run, and the
// same call sent later may. A release or a clean-up so refused has not
// been answered; it is unfinished, as one that could not reach the server.
func TurnedAway(err error) bool { return IsReply(err) && Transient(err) }

// BadTLS reports whether err is a TLS handshake that failed for a reason
// that trying again does not change: the server does not speak TLS (its
// first bytes are not a TLS record), its certificate is not trusted or not
// for its name, or it refused the client's certificate. With TLS 1.3 the
// server refuses a client's certificate (none given, or one it does not
// trust) after the client's side of the handshake is done: the refusal
// comes as a TLS alert in the reply to the first command, a *net.OpError
// whose Op is "remote error".
func BadTLS(err error) bool {
	var (
		rec     tls.RecordHeaderError
		verify  *tls.CertificateVerificationError
		alert   tls.AlertError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
		op      *net.OpError
	)
	return errors.As(err, &rec) || errors.As(err, &verify) || errors.As(err, &alert) ||
		errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid) ||
		errors.As(err, &op) && op.Op == "remote error" // a TLS alert from the server
}

// asking names the kind of lock whose script s is, as the start of a
// kind-mismatch message ("a FairMutex cannot take "): so that the message
// names both kinds.
func asking(s *Script) string {
	var kind string
	switch n := strings.TrimSuffix(s.Name, ".lua"); {
	case n == "acquire":
		kind = "Mutex"
	case n == "quorum_acquire":
		kind = "Redlock Mutex"
	case strings.HasPrefix(n, "reentrant_"):
		kind = "ReentrantMutex"
	case strings.HasPrefix(n, "fair_"):
		kind = "FairMutex"
	case strings.HasPrefix(n, "rw_"):
		kind = "RWMutex"
	case strings.HasPrefix(n, "semaphore_"):
		kind = "Semaphore"
	default:
		return ""
	}
	return "a " + kind + " cannot take the name: "
}

// The scripts of an election (see package election).
var (
	ElectPublish  = load("elect_publish.lua")
	ElectRead     = load("elect_read.lua")
	ElectWithdraw = load("elect_withdraw.lua")
)

// MajorityFence returns the highest fence that a majority of fences (one
// Redlock node's fence counter each, 0 for a node that did not answer)
// reach: the fence that every later grant on those nodes exceeds, since
// every grant's majority includes one of them.
func MajorityFence(fences []uint64) uint64 {
	sorted := slices.Sorted(slices.Values(fences))
	return sorted[len(sorted)-len(sorted)/2-1]
}
