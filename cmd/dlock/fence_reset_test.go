package main_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testenv"
)

// One check with a forged fence of 2^63-1 makes every real holder's
// fence stale; dlock fence reset is the operator's way out, for every
// store dlock fence keeps fences in (issue 33). It asks for --yes, says
// on stderr what the record was and is (a line for people and the
// fence-reset event of the log observer), lets the lock's latest fence
// in while an older one stays stale, and 0 forgets the resource. With
// --max-jump, check refuses the forged fence in the first place.
func TestIntegrationFenceReset(t *testing.T) {
	t.Parallel()
	const forged = "9223372036854775807"
	redis := testenv.StartRedis(t, testenv.RedisConfig{Persistence: true})
	pg := testenv.StartPostgres(t)
	my := testenv.StartMariaDB(t)
	root, err := sql.Open("mysql", my.RootDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.ExecContext(context.Background(), "SET GLOBAL innodb_flush_log_at_trx_commit = 1"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, store := range []struct {
		name  string
		flags []string
	}{
		{"file", []string{"--file", filepath.Join(dir, "report")}},
		{"redis", []string{"--redis", "redis://" + redis.Addr(), "--resource", "report"}},
		{"postgres", []string{"--postgres", pg.URL(), "--resource", "report"}},
		{"mysql", []string{"--mysql", my.DSN(), "--resource", "report"}},
	} {
		t.Run(store.name, func(t *testing.T) {
			fence := func(want int, args ...string) string {
				t.Helper()
				code, _, stderr := fenceCmd(t, "", nil, append(args, store.flags...)...)
				if code != want {
					t.Fatalf("dlock fence %q: exit %d, %q; want %d", args, code, stderr, want)
				}
				return stderr
			}
			fence(0, "check", "--fence", forged)
			fence(77, "check", "--fence", "101")
			if stderr := fence(64, "reset", "--fence", "101"); !strings.Contains(stderr, "--yes") {
				t.Errorf("reset without --yes: %q; want it named", stderr)
			}
			stderr := fence(0, "reset", "--fence", "101", "--yes")
			t.Logf("reset: %s", stderr)
			if !strings.Contains(stderr, "was "+forged+", is now 101") || !strings.Contains(stderr, "fence-reset") || !strings.Contains(stderr, "previous="+forged) {
				t.Errorf("reset says %q; want the previous and the new fence, and the fence-reset event", stderr)
			}
			fence(0, "check", "--fence", "101")
			fence(77, "check", "--fence", "100")
			if stderr := fence(0, "reset", "--fence", "0", "--yes"); !strings.Contains(stderr, "was 101, is now 0") {
				t.Errorf("reset to 0 says %q", stderr)
			}
			fence(0, "check", "--fence", "5")
			if store.name == "file" {
				fence(64, "check", "--fence", forged, "--max-jump", "1000000")
				return
			}
			if stderr := fence(77, "check", "--fence", forged, "--max-jump", "1000000"); !strings.Contains(stderr, "above the newest") {
				t.Errorf("a forged fence with --max-jump: %q; want it refused as too high", stderr)
			}
			fence(0, "check", "--fence", "900005", "--max-jump", "1000000")
		})
	}
}
