package redislock_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
)

// serverMicros reads the server's clock (TIME) in microseconds.
func serverMicros(t *testing.T, srv *testenv.Redis) int64 {
	t.Helper()
	out, err := srv.Do("TIME")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		t.Fatalf("TIME = %q", out)
	}
	s, _ := strconv.ParseInt(f[0], 10, 64)
	us, _ := strconv.ParseInt(f[1], 10, 64)
	return s*1_000_000 + us
}

// A Mutex's fence is the server's clock in µs, whatever its slot's counter
// held below it (a restart without the data, a promoted replica whose
// counter lagged), and the counter plus one when the counter is ahead (a
// clock stepped back): it never goes down.
func TestIntegrationMutexFenceFollowsTheClockAndNeverGoesBack(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	srv := d.servers[0]
	ctx := timeout(t, 30*time.Second)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c := newClient(t, d, tr.open)
			name := "fence-clock-" + tr.name
			counter := redislock.FenceKey(name)
			fence := func() int64 {
				t.Helper()
				l, err := c.NewMutex(name).TryLock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Release(ctx)
				return int64(l.Fence())
			}
			stored := func() int64 {
				t.Helper()
				out, err := srv.Do("GET", counter)
				if err != nil {
					t.Fatal(err)
				}
				n, err := strconv.ParseInt(out, 10, 64)
				if err != nil {
					t.Fatalf("counter %q: %v", out, err)
				}
				return n
			}

			for _, lagging := range []string{"", "5"} { // missing; far behind
				if lagging == "" {
					srv.Do("DEL", counter)
				} else {
					srv.Do("SET", counter, lagging)
				}
				before := serverMicros(t, srv)
				f := fence()
				after := serverMicros(t, srv)
				if f < before || f > after {
					t.Errorf("counter %q: fence %d; want the server's clock, within [%d, %d]", lagging, f, before, after)
				}
				if s := stored(); s != f {
					t.Errorf("counter %d after fence %d; want them equal", s, f)
				}
			}

			ahead := serverMicros(t, srv) + 3*3600*1_000_000 // as if the clock went back 3h
			srv.Do("SET", counter, strconv.FormatInt(ahead, 10))
			for i := int64(1); i <= 3; i++ {
				if f := fence(); f != ahead+i {
					t.Errorf("grant %d after a counter ahead of the clock at %d: fence %d; want %d", i, ahead, f, ahead+i)
				}
			}
			if s := stored(); s != ahead+3 {
				t.Errorf("counter %d; want %d", s, ahead+3)
			}
		})
	}
}
