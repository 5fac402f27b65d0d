package redislock_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// apartEnv names the test that a process of the package's test binary,
// started by apart, is to run.
const apartEnv = "REDISLOCK_TEST_APART"

// apart runs t in a process of its own, beside the package's other tests
// (t.Parallel), and reports true; in that process it reports false, and
// the caller runs the test there. A conformance suite (dlocktest.Run)
// needs a process to itself: its case CancelledWait checks that the
// process has no more goroutines after a cancelled wait than before,
// which other tests running beside it break ("98 before, 224 after").
// The process is the same test binary, with the race detector if it has
// it; its output is logged, and its failure fails t.
func apart(t *testing.T) bool {
	t.Helper()
	if os.Getenv(apartEnv) == t.Name() {
		return false
	}
	testenv.SkipIfShort(t, "needs redis-server")
	t.Parallel()
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	args := []string{"-test.run=" + strings.Join(parts, "/"), "-test.count=1", "-test.v"}
	if d, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout="+time.Until(d).Round(time.Second).String())
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), apartEnv+"="+t.Name())
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()+" ") {
		t.Errorf("%s, in a process of its own: %v\n%s", t.Name(), err, out)
		return true
	}
	t.Logf("%s passed in a process of its own in %v", t.Name(), time.Since(start).Round(time.Millisecond))
	if testing.Verbose() {
		t.Logf("%s", out)
	}
	return true
}
