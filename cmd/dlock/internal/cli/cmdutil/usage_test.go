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

// Flags are written as the README writes them, with their defaults, and
// a zero default is left out.
func TestPrintUsageWritesFlagsAsTheREADME(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	ttl, wait := 30*time.Second, time.Duration(0)
	fs.Var(DurationFlag{D: &ttl, Min: time.Millisecond}, "ttl", "lease time")
	fs.Var(DurationFlag{D: &wait}, "wait", "how long to wait")
	fs.String("kind", "mutex", "lock kind")
	fs.Bool("v", false, "verbose")
	var b strings.Builder
	PrintUsage(&b, "", fs)
	want := "  --kind string\n    \tlock kind (default \"mutex\")\n" +
		"  --ttl duration\n    \tlease time (default 30s)\n" +
		"  -v\n    \tverbose\n" +
		"  --wait duration\n    \thow long to wait\n"
	if b.String() != want {
		t.Errorf("PrintUsage wrote\n%s\nwant\n%s", b.String(), want)
	}
}
