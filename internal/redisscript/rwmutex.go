package redisscript

// The scripts of redislock's RWMutex. Its write side is released and
// refreshed by Release and Refresh.
var (
	RWReadAcquire  = loadClaiming("rw_read_acquire.lua")
	RWWriteAcquire = loadClaiming("rw_write_acquire.lua")
	RWReadRelease  = load("rw_read_release.lua")
	RWReadRefresh  = load("rw_read_refresh.lua")
	RWDowngrade    = load("rw_downgrade.lua")
	RWWithdraw     = load("rw_withdraw.lua")
)
