package main

import (
	"bytes"
	"context"
	"io"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	"database/sql"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/mysqllock"
)

// The MySQL example runs against a real MariaDB named by DLOCK_MYSQL: it
// creates mysqllock's table, takes the lock, works and releases it; run
// while another client holds the lock, it says so and returns.
func TestIntegrationMysqllockExample(t *testing.T) {
	srv := testenv.StartMariaDB(t)
	t.Setenv("DLOCK_MYSQL", srv.DSN())
	wantLogged(t, runMain(t), "generating the report with fence ")

	db, err := sql.Open("mysql", srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	locks := mysqllock.New(db)
	defer locks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held, err := locks.NewMutex("nightly-report").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the example returned: %v; want the lock released", err)
	}
	defer held.Release(ctx)
	wantLogged(t, runMain(t), "another process holds nightly-report")
}

// runMain runs the example's main and returns what it logged, which also
// goes to stderr, so that a log.Fatal that ends the test binary shows why.
func runMain(t *testing.T) string {
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

// wantLogged fails t unless out holds want.
func wantLogged(t *testing.T, out, want string) {
	t.Helper()
	if !strings.Contains(out, want) {
		t.Errorf("main logged %q; want a line with %q", out, want)
	}
}
