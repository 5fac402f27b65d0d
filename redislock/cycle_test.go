package redislock_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/redislock"
)

// cycleCommands is what one uncontended Mutex cycle (TryLock on a free
// name, Release) costs the server, Lua-internal commands included: the
// acquire's EVALSHA, SET NX PX, TIME and SET ... GET (the fence), and the
// release's EVALSHA, GET and DEL. The floor (a plain SET NX PX and a
// compare-and-delete script) runs 4; the fence and the Lua acquire that
// keeps it with the lock cost the other 3.
const cycleCommands = 7

// commandStats returns every command's calls from INFO commandstats.
func commandStats(t testing.TB, d *deployment) map[string]int {
	t.Helper()
	info, err := d.admin(t).Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	stats := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		n, _ := strconv.Atoi(rest[:strings.IndexByte(rest+",", ',')])
		stats[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return stats
}

// An uncontended Mutex cycle runs cycleCommands commands on the server,
// on both transports: a change that adds one to the hot path fails here.
func TestIntegrationMutexCycleCommands(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, time.Minute)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c := newClient(t, d, tr.open)
			cycle := func(name string) {
				t.Helper()
				l, err := c.NewMutex(name, redislock.WithTTL(time.Minute)).TryLock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			cycle("cycle-warm-" + tr.name) // loads the scripts, dials
			const n = 20
			before := commandStats(t, d)
			for i := range n {
				cycle(fmt.Sprintf("cycle-%s-%d", tr.name, i)) // fresh names, as the benchmark's S1
			}
			after := commandStats(t, d)
			total, per := 0, map[string]float64{}
			for cmd, calls := range after {
				if cmd == "info" || cmd == "hello" || strings.HasPrefix(cmd, "client|") {
					continue // the measurement's own: commandStats's client
				}
				if k := calls - before[cmd]; k > 0 {
					total += k
					per[cmd] = float64(k) / n
				}
			}
			var list []string
			for _, cmd := range slices.Sorted(maps.Keys(per)) {
				list = append(list, fmt.Sprintf("%s %.2f", cmd, per[cmd]))
			}
			got := float64(total) / n
			t.Logf("%.2f server commands per cycle: %s", got, strings.Join(list, ", "))
			if got > cycleCommands {
				t.Errorf("%.2f server commands per uncontended cycle (%s); want at most %d", got, strings.Join(list, ", "), cycleCommands)
			}
		})
	}
}
