package redisscript

// The scripts of the fair (FIFO) lock; see each file's header.
var (
	FairAcquire = loadHolding("fair_acquire.lua")
	FairRelease = load("fair_release.lua")
	FairLeave   = load("fair_leave.lua")
)
