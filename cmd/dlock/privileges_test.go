package main_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/mysqllock"
	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5"
)

// inspect creates no table: on a database without mysqllock's table it
// shows the lock free and leaves the database as it was. An account with
// only SELECT, INSERT and UPDATE on the table (README, Security) runs and
// inspects; one with only SELECT inspects, and its run is exit 64, naming
// the grant.
func TestIntegrationMySQLLeastPrivilege(t *testing.T) {
	t.Parallel()
	srv := testenv.StartMariaDB(t)
	ctx := context.Background()
	root, err := sql.Open("mysql", srv.RootDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	tableExists := func() bool {
		var n int
		if err := root.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?", mysqllock.DefaultTable).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	if r := dlock(t, nil, "inspect", "--mysql", srv.DSN(), "x"); r.code != 0 || !strings.Contains(r.stdout, "held") {
		t.Errorf("inspect without the table: exit %d, %q %q; want 0, not held", r.code, r.stdout, r.stderr)
	}
	if tableExists() {
		t.Fatalf("inspect created table %s", mysqllock.DefaultTable)
	}

	schema, err := mysqllock.SchemaSQL("")
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		schema,
		"CREATE USER 'least'@'127.0.0.1' IDENTIFIED BY 'least-pw'",
		"GRANT SELECT, INSERT, UPDATE ON " + testenv.MariaDBDatabase + "." + mysqllock.DefaultTable + " TO 'least'@'127.0.0.1'",
		"CREATE USER 'reader'@'127.0.0.1' IDENTIFIED BY 'reader-pw'",
		"GRANT SELECT ON " + testenv.MariaDBDatabase + "." + mysqllock.DefaultTable + " TO 'reader'@'127.0.0.1'",
	} {
		if _, err := root.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	least := "least:least-pw@tcp(" + srv.Addr() + ")/" + testenv.MariaDBDatabase
	if r := dlock(t, nil, "run", "--mysql", least, "x", "--", "true"); r.code != 0 {
		t.Errorf("run as an account with SELECT, INSERT, UPDATE: exit %d, %q; want 0", r.code, r.stderr)
	}
	if r := dlock(t, nil, "inspect", "--mysql", least, "x"); r.code != 0 {
		t.Errorf("inspect as an account with SELECT, INSERT, UPDATE: exit %d, %q; want 0", r.code, r.stderr)
	}
	reader := "reader:reader-pw@tcp(" + srv.Addr() + ")/" + testenv.MariaDBDatabase
	if r := dlock(t, nil, "inspect", "--mysql", reader, "x"); r.code != 0 {
		t.Errorf("inspect as an account with SELECT: exit %d, %q; want 0", r.code, r.stderr)
	}
	r := dlock(t, nil, "run", "--mysql", reader, "x", "--", "true")
	if r.code != 64 || !strings.Contains(r.stderr, "grant") || strings.Contains(r.stderr, "cannot reach") {
		t.Errorf("run as an account with only SELECT: exit %d, %q; want 64 naming the grant", r.code, r.stderr)
	}
}

// The same on PostgreSQL, where the role may not create in schema public:
// run, inspect and fence check work with the grants pglock's and fence's
// docs name, and a role without them is exit 64, naming the grant.
func TestIntegrationPostgresLeastPrivilege(t *testing.T) {
	t.Parallel()
	srv := testenv.StartPostgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if r := dlock(t, nil, "inspect", "--postgres", srv.URL(), "x"); r.code != 0 || !strings.Contains(r.stdout, "held") {
		t.Errorf("inspect without the table: exit %d, %q %q; want 0, not held", r.code, r.stdout, r.stderr)
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", pglock.DefaultTable).Scan(&exists); err != nil || exists {
		t.Fatalf("inspect created table %s (%v)", pglock.DefaultTable, err)
	}

	schema, err := pglock.SchemaSQL("")
	if err != nil {
		t.Fatal(err)
	}
	tbl := pglock.DefaultTable
	for _, stmt := range []string{
		"REVOKE CREATE ON SCHEMA public FROM PUBLIC",
		schema,
		fence.NewSQL(fence.Postgres).Schema(),
		"CREATE ROLE least LOGIN",
		"GRANT SELECT, INSERT, UPDATE ON " + tbl + ", " + tbl + "_fences, " + fence.DefaultTable + " TO least",
		"GRANT USAGE ON SEQUENCE " + tbl + "_fence_seq TO least",
		"CREATE ROLE nogrants LOGIN",
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	as := func(role string) string { return strings.Replace(srv.URL(), testenv.PostgresUser+"@", role+"@", 1) }
	for _, args := range [][]string{
		{"run", "--postgres", as("least"), "x", "--", "true"},
		{"inspect", "--postgres", as("least"), "x"},
		{"fence", "check", "--fence", "5", "--postgres", as("least"), "--resource", "r"},
	} {
		if r := dlock(t, nil, args...); r.code != 0 {
			t.Errorf("%s as a role with the documented grants: exit %d, %q; want 0", args[0], r.code, r.stderr)
		}
	}
	for _, args := range [][]string{
		{"run", "--postgres", as("nogrants"), "x", "--", "true"},
		{"inspect", "--postgres", as("nogrants"), "x"},
		{"fence", "check", "--fence", "5", "--postgres", as("nogrants"), "--resource", "r"},
	} {
		r := dlock(t, nil, args...)
		if r.code != 64 || !strings.Contains(r.stderr, "grant") || strings.Contains(r.stderr, "cannot reach") {
			t.Errorf("%s as a role without grants: exit %d, %q; want 64 naming the grant", args[0], r.code, r.stderr)
		}
	}
}
