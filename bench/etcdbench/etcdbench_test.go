package etcdbench

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// A short run of both scenarios: every row measured something, and a
// hand-over costs each contender about one watch notification (each
// waiter watches only the key ahead of it).
func TestIntegrationShortRun(t *testing.T) {
	testenv.SkipIfShort(t, "starts an etcd cluster")
	testenv.RequireBinary(t, "etcd")
	cfg := ShortConfig()
	cfg.Duration = 300 * time.Millisecond
	rows, err := Run(cfg, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + Markdown(rows, cfg))
	if len(rows) != 4 {
		t.Fatalf("%d rows; want 4", len(rows))
	}
	for _, r := range rows {
		if r.Ops == 0 || r.PerSecond <= 0 || r.P50 <= 0 || r.Requests <= 0 {
			t.Errorf("%s %s measured nothing: %+v", r.Scenario, r.Contender, r)
		}
		if r.Scenario == "E2" && (r.Notifications < 0.5 || r.Notifications > 1.5) {
			t.Errorf("%s %s: %.2f watch notifications per hand-over; want about 1", r.Scenario, r.Contender, r.Notifications)
		}
	}
}
