// Package redisscript holds the Lua scripts dlock runs on Redis, shared by
// redislock (one deployment) and redlock (a quorum of masters), and the
// explanation of the server errors they can meet.
package redisscript

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"
)

// A Script is a Lua script with its SHA-1 digest.
type Script struct {
	Name string // the file it came from, for error messages
	Src  string
	SHA1 string
}

// New returns a Script for src.
func New(name, src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{Name: name, Src: src, SHA1: hex.EncodeToString(sum[:])}
}

//go:embed lua/*.lua
var files embed.FS

func load(name string) *Script {
	src, err := files.ReadFile(path.Join("lua", name))
	if err != nil {
		panic("redisscript: missing embedded script " + name) // a build defect, not an input
	}
	return New(strings.TrimSuffix(name, ".lua"), string(src))
}

// claimPrologue runs before every acquire script. One lock name serves one
// kind of lock: the kind that first takes a name records itself in a
// marker key, passed as the script's last key with the kind as its last
// argument, and every other kind is refused. Being last, they leave the
// script's own KEYS and ARGV numbering unchanged.
const claimPrologue = `local dlock_kind = redis.call('GET', KEYS[#KEYS])
if dlock_kind and dlock_kind ~= ARGV[#ARGV] then
  return redis.error_reply('DLOCKKIND dlock lock name ' .. KEYS[#KEYS] .. ' is used by a ' .. dlock_kind)
end
if not dlock_kind then
  redis.call('SET', KEYS[#KEYS], ARGV[#ARGV])
end
`

// loadClaiming loads an acquire script behind claimPrologue.
func loadClaiming(name string) *Script {
	s := load(name)
	return New(s.Name, claimPrologue+s.Src)
}

// The scripts. Each file's header lists its KEYS and ARGV; those loaded
// with loadClaiming take one more key and argument (see claimPrologue).
var (
	Acquire       = loadClaiming("acquire.lua")
	Release       = load("release.lua")
	Refresh       = load("refresh.lua")
	QuorumAcquire = load("quorum_acquire.lua")

	ReentrantAcquire = loadClaiming("reentrant_acquire.lua")
	ReentrantRelease = load("reentrant_release.lua")
	ReentrantRefresh = load("reentrant_refresh.lua")
	QuorumFence      = load("quorum_fence.lua")
)

// A ReplyError is an error reply from the server, as opposed to a failure
// to reach it.
type ReplyError struct{ Msg string }

func (e *ReplyError) Error() string { return e.Msg }

// IsReply reports whether err is an error reply from the server.
func IsReply(err error) bool {
	var re *ReplyError
	return errors.As(err, &re)
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
		kind := msg[strings.LastIndex(msg, " ")+1:]
		return fmt.Errorf("%s: the name of %q is already used by a %s; one name serves one kind of lock, so pick another name: %w", pkg, key, kind, err)
	case strings.Contains(msg, "DLOCKFENCE"):
		return fmt.Errorf("%s: the fence counter of %q does not hold a number; something other than dlock wrote it: %w", pkg, key, err)
	case strings.Contains(msg, "NOPERM") || strings.Contains(msg, "unknown command") ||
		strings.Contains(msg, "NOSCRIPT") || strings.Contains(msg, "scripting"):
		return fmt.Errorf("%s: the server refused to run a Lua script (%s); dlock needs EVALSHA and EVAL to be allowed: %w", pkg, msg, err)
	}
	return fmt.Errorf("%s: %s on %q: server replied: %w", pkg, s.Name, key, err)
}
