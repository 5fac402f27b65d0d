package redisscript

// Scripts for operators: inspection and forced release.
var (
	Inspect     = loadHolding("inspect.lua")
	ForceUnlock = load("force_unlock.lua")
)
