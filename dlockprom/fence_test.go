package dlockprom_test

import (
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlockprom"
	"github.com/dlock-go/dlock/fence"
)

// The writes a guard of package fence reports are counted by result, and
// Forget deletes their series with the rest.
func TestFencedWrites(t *testing.T) {
	c := dlockprom.New()
	mem := fence.NewMemory(fence.WithObserver(c))
	ctx := t.Context()
	for _, f := range []uint64{5, 5, 6, 4, 3} {
		mem.Advance(ctx, "orders", f)
	}
	labels := func(result string) map[string]string {
		return map[string]string{"lock": "orders", "kind": "memory", "result": result}
	}
	if got := value(t, c, "dlock_fenced_writes_total", labels("accepted")); got != 3 {
		t.Errorf("accepted: %v; want 3", got)
	}
	if got := value(t, c, "dlock_fenced_writes_total", labels("stale")); got != 2 {
		t.Errorf("stale: %v; want 2", got)
	}
	c.Forget("orders")
	if got := value(t, c, "dlock_fenced_writes_total", labels("stale")); got != -1 {
		t.Errorf("after Forget: %v; want no series", got)
	}
	if dlock.EventFenceRefused.String() != "fence-refused" || dlock.EventFenceAccepted.String() != "fence-accepted" {
		t.Errorf("event names %q, %q", dlock.EventFenceAccepted, dlock.EventFenceRefused)
	}
}
