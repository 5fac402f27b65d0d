package redisscript

// The scripts of redislock's RWMutex.
var (
	RWReadAcquire  = loadHolding("rw_read_acquire.lua")
	RWWriteAcquire = loadHolding("rw_write_acquire.lua")
	RWRelease      = load("rw_release.lua")
	RWRefresh      = loadHolding("rw_refresh.lua")
	RWDowngrade    = loadHolding("rw_downgrade.lua")
	RWWithdraw     = load("rw_withdraw.lua")
)
