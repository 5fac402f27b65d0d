package redisscript

// Scripts for operators: inspection and forced release.
var (
	Inspect     = load("inspect.lua")
	ForceUnlock = load("force_unlock.lua")
)
