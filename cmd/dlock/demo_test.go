package main_test

import (
	"regexp"
	"testing"
	"time"
)

// dlock demo as a user runs it: exit 0, a readable account on stdout,
// nothing on stderr (no library's own log lines), every server stopped.
func TestIntegrationDemo(t *testing.T) {
	t.Parallel()
	p := startDlock(t, nil, "demo", "--workers", "2", "--rounds", "1", "--no-zk")
	r := p.wait(t, 2*time.Minute)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing\n%s", r.code, r.stderr, r.stdout)
	}
	for _, want := range []string{
		`(?m)^Started redis-server on 127\.0\.0\.1:\d+ \(pid (\d+)`,
		`refused: fence \d+ is older than \d+`,
		`node C 127\.0\.0\.1:\d+ killed \(kill -9\)`,
		`granted again`,
		`(?m)^Violations:    0 `,
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("output does not match %q:\n%s", want, r.stdout)
		}
	}
	// An error chain is for logs; the demo says what happened in words.
	if m := regexp.MustCompile(`(?m)^.*dlock: .*dlock: .*$`).FindString(r.stdout); m != "" {
		t.Errorf("output prints an error chain: %q", m)
	}
	for _, m := range regexp.MustCompile(`\(pid (\d+)`).FindAllStringSubmatch(r.stdout, -1) {
		if processAlive(m[1]) {
			t.Errorf("server pid %s still running after the demo exited", m[1])
		}
	}
}
