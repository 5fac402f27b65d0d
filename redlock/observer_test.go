package redlock_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redlock"
)

// WithLogger logs the lock events through dlock.LogObserver, alongside
// WithObserver.
func TestIntegrationWithLogger(t *testing.T) {
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rec := &dlocktest.Recorder{}
	c := newClient(t, addrsOf(servers), goRedis, redlock.WithObserver(rec), redlock.WithLogger(log))
	ctx := timeout(t, 10*time.Second)
	l, err := c.NewMutex("observer-logger").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l.Release(ctx)
	if evs := rec.Events(); len(evs) != 3 {
		t.Errorf("observer got %s; want acquiring, acquired, released", dlocktest.Kinds(evs))
	}
	out := buf.String()
	for _, want := range []string{"dlock: acquiring", "dlock: acquired", "dlock: released", "lock=observer-logger", "kind=mutex"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}
