package redisscript

// Scripts for operators: inspection and forced release.
var (
	Inspect     = loadHolding("inspect.lua")
	ForceUnlock = loadHolding("force_unlock.lua")
)
