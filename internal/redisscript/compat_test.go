package redisscript

import (
	"io/fs"
	"regexp"
	"testing"
)

// redlock and redislock support Redis 6.2 (README, "Which Redis lock?"),
// which refuses SET with both NX and GET (allowed from 7.0) as a syntax
// error: a script that sends it fails on 6.2 whatever the data. The tests'
// servers run 7.0, so this reads the scripts.
func TestScriptsRunOnRedis62(t *testing.T) {
	set := regexp.MustCompile(`(?i)redis\.p?call\(\s*'SET'.*`) // to the end of the line
	nx, get := regexp.MustCompile(`(?i)'NX'`), regexp.MustCompile(`(?i)'GET'`)
	names, err := fs.Glob(files, "lua/*.lua")
	if err != nil || len(names) == 0 {
		t.Fatalf("no embedded scripts: %v", err)
	}
	for _, name := range names {
		src, err := files.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, call := range set.FindAll(src, -1) {
			if nx.Match(call) && get.Match(call) {
				t.Errorf("%s: %s: SET with NX and GET needs Redis 7.0; dlock supports 6.2", name, call)
			}
		}
	}
}
