package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testenv"
)

// Under dlock run, which keeps $DLOCK_REDIS_PASSWORD from COMMAND, dlock
// fence --redis authenticates with --password-file. A missing or wrong
// password, and a key of another type, are exit 64 with a line that says
// what to fix; check never calls itself a write.
func TestIntegrationFenceRedisPassword(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t, testenv.RedisConfig{Persistence: true, Args: []string{"--requirepass", "s3cret"}})
	dir := t.TempDir()
	good, wrong := filepath.Join(dir, "good"), filepath.Join(dir, "wrong")
	if err := os.WriteFile(good, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wrong, []byte("nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := "redis://" + srv.Addr()
	script := `"$BIN" fence check --redis "$URL" --resource report --password-file "$PW"`
	r := dlock(t, []string{"BIN=" + binary(t), "URL=" + url, "PW=" + good, "DLOCK_REDIS_PASSWORD=s3cret"},
		"run", "--redis", url, lockName(t), "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("fence check --password-file under run: exit %d, %q; want 0", r.code, r.stderr)
	}
	if _, err := srv.Do("RPUSH", "a-list-key", "x"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "--redis", url, "--resource", "report"}, "--password-file"},
		{[]string{"check", "--redis", url, "--resource", "report", "--password-file", wrong}, "refused the password"},
		{[]string{"write", "--redis", url, "--resource", "report", "--password-file", wrong}, "refused the password"},
		{[]string{"check", "--redis", url, "--resource", "report", "--password-file", filepath.Join(dir, "none")}, "--password-file"},
		{[]string{"check", "--redis", "redis://:x@" + srv.Addr(), "--resource", "report", "--password-file", good}, "give one"},
		{[]string{"write", "--redis", url, "--resource", "a-list-key", "--password-file", good}, "another type"},
	} {
		code, _, stderr := fenceCmd(t, "data", nil, append(c.args, "--fence", "9")...)
		if code != 64 || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "s3cret") {
			t.Errorf("dlock fence %q: exit %d, %q; want 64 naming %q, no password", c.args, code, stderr, c.want)
		}
		if c.args[0] == "check" && strings.Contains(stderr, "fenced write") {
			t.Errorf("dlock fence %q: %q calls a check a write", c.args, stderr)
		}
	}
}
