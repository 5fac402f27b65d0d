package main_test

import (
	"net"
	"strings"
	"testing"
	"time"
)

// A database that accepts connections but never answers is exit 69 within
// the documented time (5s, as for every backend), and the line names it.
func TestSilentDatabaseFailsNamingIt(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0") // never accepts: nothing answers
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() }) // after the parallel subtests
	addr := l.Addr().String()
	for _, tc := range []struct {
		name  string
		flags []string
		limit time.Duration
	}{
		{"mysql", []string{"--mysql", "app:pw@tcp(" + addr + ")/app"}, 9 * time.Second},
		{"postgres", []string{"--postgres", "postgres://app:pw@" + addr + "/app"}, 9 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := dlock(t, nil, append(append([]string{"run"}, tc.flags...), "x", "--", "true")...)
			if r.code != 69 || !strings.Contains(r.stderr, "does not answer") || !strings.Contains(r.stderr, addr) || strings.Contains(r.stderr, "pw@") {
				t.Errorf("exit %d, %q; want 69 naming %s as not answering, without the password", r.code, r.stderr, addr)
			}
			if r.took > tc.limit {
				t.Errorf("took %v; want at most %v", r.took, tc.limit)
			}
			t.Logf("exit %d after %v: %s", r.code, r.took.Round(time.Millisecond), strings.TrimSpace(r.stderr))
		})
	}
}
