package main_test

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// A server that wants another password is a mistake in the URL or the
// environment: exit 64, and the message says so and names the variable
// that holds the password.
func TestIntegrationWrongRedisPassword(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t, testenv.RedisConfig{Args: []string{"--requirepass", "s3cret"}})
	for _, tc := range []struct {
		name, url, want string
	}{
		{"none", "redis://" + srv.Addr(), "NOAUTH"},
		{"wrong", "redis://:wrong@" + srv.Addr(), "WRONGPASS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range [][]string{{"run", "--redis", tc.url, "x", "--", "true"}, {"inspect", "--redis", tc.url, "x"}} {
				r := dlock(t, nil, cmd...)
				if r.code != 64 || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "DLOCK_REDIS_PASSWORD") || strings.Contains(r.stderr, "cannot reach") {
					t.Errorf("dlock %s with password %s: exit %d, %q; want 64 naming %s and DLOCK_REDIS_PASSWORD", cmd[0], tc.name, r.code, r.stderr, tc.want)
				}
				if strings.Contains(r.stderr, "wrong") {
					t.Errorf("the password is shown: %q", r.stderr)
				}
			}
		})
	}
}

// A database number past the server's last is a mistake in the URL: exit
// 64, not a service failure.
func TestIntegrationRedisDatabaseOutOfRange(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	for _, cmd := range [][]string{{"run", "--redis", "redis://" + srv.Addr() + "/16", "x", "--", "true"}, {"inspect", "--redis", "redis://" + srv.Addr() + "/16", "x"}} {
		r := dlock(t, nil, cmd...)
		if r.code != 64 || !strings.Contains(r.stderr, "database number") || strings.Contains(r.stderr, "cannot reach") {
			t.Errorf("dlock %s on database 16 of 16: exit %d, %q; want 64 naming the database number", cmd[0], r.code, r.stderr)
		}
	}
	if r := dlock(t, nil, "run", "--redis", "redis://"+srv.Addr()+"/15", "x", "--", "true"); r.code != 0 {
		t.Errorf("dlock run on database 15: exit %d, %q", r.code, r.stderr)
	}
}

// A signal while waiting is named as kill(1) names it.
func TestIntegrationInterruptedWhileWaiting(t *testing.T) {
	t.Parallel()
	d := redisDeployment(t, 1)
	name := lockName(t)
	holder := holdInBackground(t, d, name)
	// -v: its log says when it waits. A fixed 300ms was too short on a
	// loaded machine: the SIGTERM came before dlock could catch it.
	waiter, log := startLogged(t, nil, runArgs(d, "-v", "--wait", "1m", name, "--", "true")...)
	waitQueued(t, waiter, log)
	waiter.signal(t, syscall.SIGTERM)
	r := waiter.wait(t, 10*time.Second)
	stderr, _ := os.ReadFile(log)
	if line := dlockLine(string(stderr)); r.code != 128+int(syscall.SIGTERM) || !strings.Contains(line, "interrupted by SIGTERM") {
		t.Errorf("waiter after SIGTERM: exit %d, %q; want 143 and 'interrupted by SIGTERM'", r.code, line)
	}
	holder.signal(t, syscall.SIGINT)
	holder.wait(t, 10*time.Second)
}

// Help writes flags as the README does, each default once.
func TestHelpWritesFlagsOnce(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"run", "run-flags", "inspect", "release", "list", "bench"} {
		r := dlock(t, nil, "help", cmd)
		if r.code != 0 {
			t.Fatalf("dlock help %s: exit %d", cmd, r.code)
		}
		for _, line := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(line, "  -") && !strings.HasPrefix(line, "  --") && len(strings.Fields(line)[0]) > 2 {
				t.Errorf("dlock help %s: %q has a single dash", cmd, line)
			}
			if strings.Count(line, "(default ") > 1 || strings.Count(line, "default ") > 1 {
				t.Errorf("dlock help %s: %q names its default twice", cmd, line)
			}
		}
	}
	r := dlock(t, nil, "help", "run-flags")
	if !strings.Contains(r.stdout, "  --ttl duration\n") || !strings.Contains(r.stdout, "(default 30s)") {
		t.Errorf("dlock help run-flags lacks --ttl and its default:\n%s", r.stdout)
	}
}
