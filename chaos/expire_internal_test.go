package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// On Redlock, an expire fault expires the key on a node that holds it, and
// is recorded as expire-bare when the holder's key stood on no more than a
// majority of the nodes: the one case where the checker allows a double
// grant after it.
func TestIntegrationExpireRecordsBareMajority(t *testing.T) {
	testenv.SkipIfShort(t, "needs redis-server")
	testenv.RequireBinary(t, "redis-server")
	d, err := startDeployment(BackendRedlock3, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.close() })
	const key = "dlock:{x}"
	for _, tc := range []struct {
		values   []string // the key's value on each node; "" for none
		kind, on string
	}{
		{[]string{"a", "a", "a"}, FaultExpire, "the key on 3 of 3 nodes"},
		{[]string{"a", "", "a"}, FaultExpireBare, "the key on 2 of 3 nodes"},
		{[]string{"a", "b", "a"}, FaultExpireBare, "the key on"},
		{[]string{"", "a", ""}, FaultExpireBare, "the key on 1 of 3 nodes"},
	} {
		for i, v := range tc.values {
			if _, err := d.redis[i].Do("DEL", key); err != nil {
				t.Fatal(err)
			}
			if v != "" {
				if _, err := d.redis[i].Do("SET", key, v, "PX", "60000"); err != nil {
					t.Fatal(err)
				}
			}
		}
		h := &History{}
		in := &injector{d: d, hist: h, rng: rand.New(rand.NewPCG(1, 2)), ttl: 500e6, name: "x",
			holder: func() int { return 0 }}
		if err := in.inject(context.Background(), FaultExpire); err != nil {
			t.Fatal(err)
		}
		evs := h.Events()
		if len(evs) < 2 || evs[0].Op != OpFault || evs[0].Fault != tc.kind || !strings.Contains(evs[0].Target, tc.on) {
			t.Errorf("%q: recorded %+v; want the fault %s, %q", tc.values, evs, tc.kind, tc.on)
			continue
		}
		time.Sleep(20 * time.Millisecond) // PEXPIRE 1
		var left []string
		for i := range tc.values {
			v, _ := d.redis[i].Do("GET", key)
			left = append(left, v)
		}
		gone := 0
		for i, v := range tc.values {
			switch {
			case v != "" && left[i] == "":
				gone++
			case v != left[i]:
				t.Errorf("%q: node %d holds %q after the fault", tc.values, i+1, left[i])
			}
		}
		if gone != 1 || !strings.HasPrefix(evs[0].Target, fmt.Sprintf("node %d ", indexGone(tc.values, left)+1)) {
			t.Errorf("%q: %q left after expiring %q; want one key gone, on the node named", tc.values, left, evs[0].Target)
		}
	}
}

// indexGone returns the first node whose key is in before and not after.
func indexGone(before, after []string) int {
	for i := range before {
		if before[i] != "" && after[i] == "" {
			return i
		}
	}
	return -1
}
