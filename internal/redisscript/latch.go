package redisscript

// The scripts of a count-down latch (redislock.Latch). Each file's header
// lists its KEYS and ARGV.
var (
	LatchSet       = load("latch_set.lua")
	LatchCountDown = load("latch_countdown.lua")
	LatchCount     = load("latch_count.lua")
)
