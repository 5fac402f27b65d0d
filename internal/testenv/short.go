package testenv

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// SkipIfShort skips t under go test -short: it needs a server, or takes
// longer than a unit test should (more than about a second). why says
// which, and is part of the skip message.
func SkipIfShort(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("skipped under -short: %s", why)
	}
}

// ShortMain is for a TestMain that starts servers for the package's
// examples: it reports whether the tests run under -short, and if so adds
// ^Example to -test.skip, since an example cannot skip itself, so that
// the caller can leave its servers unstarted. It parses the command line
// first, as testing.Short needs.
func ShortMain() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	if !testing.Short() {
		return false
	}
	skip := "^Example"
	if f := flag.Lookup("test.skip"); f != nil {
		if old := f.Value.String(); old != "" {
			skip = old + "|" + skip
		}
		if err := f.Value.Set(skip); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: cannot skip the examples under -short:", err)
			os.Exit(2)
		}
	}
	return true
}
