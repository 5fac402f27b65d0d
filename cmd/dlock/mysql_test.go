package main_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/mysqllock"
	_ "github.com/go-sql-driver/mysql"
)

func mysqlDeployment(t testing.TB, session bool) deployment {
	srv := sharedMariaDB(t)
	ctx := context.Background()
	db, err := sql.Open("mysql", srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	d := deployment{flags: []string{"--mysql", srv.DSN()}}
	if session {
		d.runFlags = []string{"--session"}
	}
	now := "TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6))"
	d.held = func(t testing.TB, name string) bool {
		var n int
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+mysqllock.DefaultTable+" WHERE name = ? AND token <> '' AND expires_at > "+now, name).Scan(&n)
		if err != nil && !strings.Contains(err.Error(), "doesn't exist") {
			t.Fatalf("reading the lock's row: %v", err)
		}
		return n > 0
	}
	d.sabotage = func(t testing.TB, name string) {
		if _, err := db.ExecContext(ctx, "DELETE FROM "+mysqllock.DefaultTable+" WHERE name = ?", name); err != nil {
			t.Fatalf("deleting the lock's row: %v", err)
		}
	}
	return d
}

// dlock run, inspect and release --force on MySQL (MariaDB), in lease
// mode and in session mode, pass what they pass on the other backends.
func TestIntegrationMySQL(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name    string
		session bool
	}{{"Lease", false}, {"Session", true}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			d := mysqlDeployment(t, mode.session)
			t.Run("SerialisedAppends", func(t *testing.T) { serialisedAppends(t, d) })
			t.Run("ExitCodeAndEnvironment", func(t *testing.T) { exitCodeAndEnvironment(t, d) })
			t.Run("ConflictAndInterrupt", func(t *testing.T) { conflictAndInterrupt(t, d) })
			t.Run("LossKillsCommand", func(t *testing.T) { lossKillsCommand(t, d, false) })
			t.Run("MaxHoldStopsCommand", func(t *testing.T) { maxHoldStopsCommand(t, d) })
			t.Run("CommandNotFound", func(t *testing.T) { commandNotFound(t, d) })
			t.Run("InspectAndForceRelease", func(t *testing.T) { inspectAndForceRelease(t, d) })
		})
	}
	t.Run("Refusals", func(t *testing.T) {
		d := mysqlDeployment(t, false)
		dsn := d.flags[1]
		for _, args := range [][]string{
			runArgs(d, "--kind", "fair", "x", "--", "true"),
			{"run", "--mysql", "not a dsn", "x", "--", "true"},
			{"run", "--mysql", "u:p@tcp(127.0.0.1:1)/", "x", "--", "true"},
			{"run", "--mysql", "postgres://u:p@h/db", "x", "--", "true"},
			{"run", "--mysql", dsn, "--postgres", "postgres://h/db", "x", "--", "true"},
			{"run", "--mysql", dsn, "--tls-ca", "/nonexistent", "x", "--", "true"},
			{"inspect", "--mysql", dsn, strings.Repeat("n", mysqllock.MaxNameBytes+1)},
			{"run", "--mysql", dsn + "?bogus=1", "x", "--", "true"},
			{"run", "--mysql", dsn, "--ttl", "25h", "x", "--", "true"},
			{"inspect", "--mysql", dsn + "?bogus=1", "x"},
		} {
			if r := dlock(t, nil, args...); r.code != 64 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("dlock %q: exit %d, %q; want 64 on one line", args, r.code, r.stderr)
			}
		}
		// A wrong password is a usage error that names DLOCK_MYSQL, and
		// never shows the password, given or wrong.
		wrong := strings.Replace(dsn, testenv.MariaDBPassword, "Sekr3t-wrong", 1)
		r := dlock(t, nil, "run", "--mysql", wrong, "x", "--", "true")
		if r.code != 64 || !strings.Contains(r.stderr, "DLOCK_MYSQL") || strings.Contains(r.stderr, "Sekr3t") {
			t.Errorf("a wrong password: exit %d, %q; want 64 naming DLOCK_MYSQL, without the password", r.code, r.stderr)
		}
		r = dlock(t, nil, "run", "--mysql", "u:Sekr3t@tcp(127.0.0.1:1)x/db", "x", "--", "true")
		if r.code != 64 || strings.Contains(r.stderr, "Sekr3t") {
			t.Errorf("a malformed DSN: exit %d, %q; want 64 without the password", r.code, r.stderr)
		}
		// -v names the database, not the password.
		r = dlock(t, nil, "run", "-v", "--mysql", dsn, "v-"+lockName(t), "--", "true")
		if r.code != 0 || !strings.Contains(r.stderr, "mysql 127.0.0.1:") || strings.Contains(r.stderr, testenv.MariaDBPassword) {
			t.Errorf("run -v: exit %d, %q; want it to name the database and not the password", r.code, r.stderr)
		}
		// The mysql:// form works too.
		url := "mysql://" + testenv.MariaDBUser + ":" + testenv.MariaDBPassword + "@" + strings.TrimSuffix(strings.TrimPrefix(strings.SplitN(dsn, "@tcp(", 2)[1], ""), ")/"+testenv.MariaDBDatabase) + "/" + testenv.MariaDBDatabase
		if r := dlock(t, nil, "run", "--mysql", url, "url-"+lockName(t), "--", "true"); r.code != 0 {
			t.Errorf("run --mysql mysql://…: exit %d, %q", r.code, r.stderr)
		}
		// DLOCK_MYSQL alone names the service, and COMMAND does not see it.
		r = dlock(t, []string{"DLOCK_MYSQL=" + dsn}, "run", "env-"+lockName(t), "--", "sh", "-c", `echo "[$DLOCK_MYSQL]"`)
		if r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
			t.Errorf("DLOCK_MYSQL: exit %d, stdout %q, stderr %q; want 0 and COMMAND without it", r.code, r.stdout, r.stderr)
		}
	})
}

// dlock fence check --mysql records fences in MySQL (MariaDB) as --postgres
// does in PostgreSQL: a stale fence is exit 77, a bad DSN exit 64. The
// test server flushes its log lazily (innodb_flush_log_at_trx_commit 2),
// which check refuses (64, naming the setting) without
// --accept-fence-loss.
func TestIntegrationFenceMySQL(t *testing.T) {
	t.Parallel()
	srv := testenv.StartMariaDB(t)
	lazy := []string{"check", "--fence", "5", "--mysql", srv.DSN(), "--resource", "accounts/7"}
	if code, _, stderr := fenceCmd(t, "", nil, lazy...); code != 64 || !strings.Contains(stderr, "innodb_flush_log_at_trx_commit") || !strings.Contains(stderr, "--accept-fence-loss") {
		t.Errorf("fence check --mysql on a server that flushes lazily: exit %d, %q; want 64 naming the setting and the flag", code, stderr)
	}
	flags := []string{"--mysql", srv.DSN(), "--resource", "accounts/7", "--accept-fence-loss"}
	for _, s := range []struct {
		fence string
		code  int
	}{{"10", 0}, {"10", 0}, {"9", 77}, {"11", 0}} {
		code, _, stderr := fenceCmd(t, "", nil, append([]string{"check", "--fence", s.fence}, flags...)...)
		if code != s.code {
			t.Fatalf("fence check --mysql with fence %s: exit %d, %q; want %d", s.fence, code, stderr, s.code)
		}
	}
	if code, _, stderr := fenceCmd(t, "", nil, "check", "--fence", "3", "--mysql", "not a dsn", "--resource", "r"); code != 64 {
		t.Errorf("fence check with a bad DSN: exit %d, %q; want 64", code, stderr)
	}
}
