package cmdutil

import (
	"flag"
	"strings"
	"testing"
	"time"
)

// A flag whose usage names its default is not given "(default …)" twice.
func TestPrintUsageNamesDefaultsOnce(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	d := 10 * time.Second
	fs.Var(DurationFlag{D: &d, Min: time.Millisecond}, "grace", "time between SIGTERM and SIGKILL (default 10s)")
	var b strings.Builder
	PrintUsage(&b, "Usage: x\n", fs)
	if n := strings.Count(b.String(), "(default 10s)"); n != 1 {
		t.Errorf("usage names the default %d times:\n%s", n, b.String())
	}
}
