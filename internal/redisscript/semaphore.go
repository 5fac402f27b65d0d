package redisscript

// The scripts of a permit-expirable semaphore (redislock.Semaphore). Each
// file's header lists its KEYS and ARGV.
var (
	SemaphoreAcquire   = loadHolding("semaphore_acquire.lua")
	SemaphoreRelease   = load("semaphore_release.lua")
	SemaphoreRefresh   = loadHolding("semaphore_refresh.lua")
	SemaphoreLimit     = load("semaphore_limit.lua")
	SemaphoreAvailable = load("semaphore_available.lua")
)
