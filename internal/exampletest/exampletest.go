// Package exampletest runs the programs under examples/ in their tests:
// each calls its own main against a real server and checks what it logged.
package exampletest

import (
	"bytes"
	"io"
	"log"
	"os"
	"strings"
	"testing"
	"time"
)

// RunMain runs an example's main and returns what it logged, which also
// goes to stderr, so that a log.Fatal that ends the test binary shows why.
func RunMain(t *testing.T, main func()) string {
	t.Helper()
	var buf bytes.Buffer
	flags := log.Flags()
	log.SetOutput(io.MultiWriter(&buf, os.Stderr))
	log.SetFlags(0)
	defer func() { log.SetOutput(os.Stderr); log.SetFlags(flags) }()
	start := time.Now()
	main()
	t.Logf("main returned after %v", time.Since(start).Round(time.Millisecond))
	return buf.String()
}

// WantLogged fails t unless out holds want.
func WantLogged(t *testing.T, out, want string) {
	t.Helper()
	if !strings.Contains(out, want) {
		t.Errorf("main logged %q; want a line with %q", out, want)
	}
}
