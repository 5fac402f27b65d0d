package run

import (
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

func TestParseGrace(t *testing.T) {
	cases := []struct {
		args  []string
		grace time.Duration // want, if err is ""
		err   string        // in the usage error
	}{
		{args: nil, grace: 10 * time.Second},
		{args: []string{"--ttl", "60s"}, grace: 10 * time.Second},
		{args: []string{"--ttl", "3s"}, grace: time.Second}, // ttl/3 is less than 10s
		{args: []string{"--ttl", "3s", "--grace", "1s"}, grace: time.Second},
		{args: []string{"--grace", "0s"}, grace: 0},
		{args: []string{"--ttl", "3s", "--grace", "1001ms"}, err: "--grace 1.001s is more than a third of --ttl 3s"},
		{args: []string{"--grace", "20s"}, err: "use --grace 10s or less, or --ttl 1m0s or more"},
	}
	for _, c := range cases {
		o, err := Parse(append(c.args, "name", "--", "true"), func(string) string { return "" })
		switch {
		case c.err != "":
			if !cmdutil.IsUsage(err) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: error %v, want a usage error with %q", c.args, err, c.err)
			}
		case err != nil:
			t.Errorf("%v: %v", c.args, err)
		case o.Grace != c.grace:
			t.Errorf("%v: grace %v, want %v", c.args, o.Grace, c.grace)
		}
	}
}

func TestParseLeaveChildren(t *testing.T) {
	o, err := Parse([]string{"--leave-children", "name", "--", "true"}, func(string) string { return "" })
	if err != nil || !o.LeaveChildren {
		t.Fatalf("--leave-children: %+v, %v", o, err)
	}
}

// On ZooKeeper a lease may last less than --ttl: the grace shrinks to fit
// it, and an explicit --grace that no longer fits is cut, with a warning.
func TestSetGrace(t *testing.T) {
	cases := []struct {
		args      []string
		leaseTime time.Duration
		grace     time.Duration
		warn      bool
	}{
		{nil, 30 * time.Second, 10 * time.Second, false},
		{nil, 3 * time.Second, time.Second, false},
		{[]string{"--grace", "1s"}, 3 * time.Second, time.Second, false},
		{[]string{"--grace", "10s"}, 3 * time.Second, time.Second, true},
	}
	for _, c := range cases {
		o, err := Parse(append(c.args, "name", "--", "true"), func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		r := &runner{o: o, io: cmdutil.IO{Err: &stderr}}
		r.setGrace(c.leaseTime)
		if r.grace != c.grace || r.leaseTime != c.leaseTime || (stderr.Len() > 0) != c.warn {
			t.Errorf("%v with a %v lease: grace %v, warning %q; want %v, a warning: %v", c.args, c.leaseTime, r.grace, stderr.String(), c.grace, c.warn)
		}
	}
}
