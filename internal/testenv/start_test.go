package testenv

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/dlock-go/dlock/internal/servers"
)

// fakeTB records how RequireBinary ends a test.
type fakeTB struct {
	testing.TB
	how, msg string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.how, f.msg = "skip", fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.how, f.msg = "fatal", fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestRequireBinaryMissing(t *testing.T) {
	for _, tt := range []struct{ ci, how string }{{"", "skip"}, {"false", "skip"}, {"true", "fatal"}, {"1", "fatal"}} {
		t.Setenv("CI", tt.ci)
		f := &fakeTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			RequireBinary(f, "redis-server-testenv-missing")
		}()
		<-done
		if f.how != tt.how || !strings.Contains(f.msg, "redis-server-testenv-missing not found") {
			t.Errorf("CI=%q: RequireBinary ended the test with %s(%q), want %s", tt.ci, f.how, f.msg, tt.how)
		}
	}
	f := &fakeTB{TB: t}
	if path := RequireBinary(f, "sh"); path == "" || f.how != "" {
		t.Errorf("RequireBinary(sh) = %q, ended with %s", path, f.how)
	}
}

// StartRedis's server is gone, process and directory, once the test that
// started it has ended; a Launch'd one stays until closed.
func TestIntegrationStartRedisCleanup(t *testing.T) {
	SkipIfShort(t, "needs redis-server")
	RequireBinary(t, "redis-server")
	var pid int
	var dir string
	t.Run("holder", func(t *testing.T) {
		r := StartRedis(t, RedisConfig{})
		if _, err := r.Do("PING"); err != nil {
			t.Fatal(err)
		}
		pid, dir = r.PID(), r.Dir()
	})
	if pid == 0 || syscall.Kill(pid, 0) == nil {
		t.Errorf("redis-server (pid %d) still running after the test that started it ended", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still there after the test that started it ended (%v)", dir, err)
	}
	l, err := servers.LaunchRedis(servers.RedisConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Do("PING"); err != nil {
		t.Errorf("a launched server: %v", err)
	}
}
