package redislock

import (
	"embed"
	"path"
)

//go:embed scripts/*.lua
var scriptFS embed.FS

func loadScript(name string) *Script {
	src, err := scriptFS.ReadFile(path.Join("scripts", name))
	if err != nil {
		panic("redislock: missing embedded script " + name) // a build defect, not an input
	}
	return NewScript(name, string(src))
}

var (
	acquireScript = loadScript("acquire.lua")
	releaseScript = loadScript("release.lua")
	refreshScript = loadScript("refresh.lua")
)
