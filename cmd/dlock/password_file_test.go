package main_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/jackc/pgx/v5"
)

// No password need be on dlock's command line, where every user reads it
// in /proc/PID/cmdline (issue 33): --password-file gives it for Redis,
// PostgreSQL and MySQL to run, elect, inspect, release and fence, and
// dlock fence reads DLOCK_POSTGRES and DLOCK_MYSQL as the others do.
// Every server below wants the password; a wrong one is exit 64, naming
// --password-file.
func TestIntegrationPasswordFile(t *testing.T) {
	t.Parallel()
	const secret = "S3cretPW-file"
	dir := t.TempDir()
	good, wrong := filepath.Join(dir, "good"), filepath.Join(dir, "wrong")
	if err := os.WriteFile(good, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wrong, []byte("nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	redis := testenv.StartRedis(t, testenv.RedisConfig{Persistence: true, Args: []string{"--requirepass", secret}})
	pg := testenv.StartPostgres(t)
	conn, err := pgx.Connect(ctx, pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// testenv's PostgreSQL trusts every connection: this role must give
	// its password.
	for _, stmt := range []string{"SET password_encryption = 'scram-sha-256'", "CREATE ROLE pwrole LOGIN SUPERUSER PASSWORD '" + secret + "'"} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	hba := filepath.Join(pg.Dir(), "data", "pg_hba.conf")
	b, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hba, append([]byte("host all pwrole 127.0.0.1/32 scram-sha-256\n"), b...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	pgURL := "postgres://pwrole@" + pg.Addr() + "/postgres?sslmode=disable"
	if r := dlock(t, nil, "inspect", "--postgres", pgURL, "x"); r.code != 64 {
		t.Fatalf("the role logs in without its password: exit %d, %q", r.code, r.stderr)
	}

	my := testenv.StartMariaDB(t)
	root, err := sql.Open("mysql", my.RootDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, stmt := range []string{
		"CREATE USER 'pwuser'@'127.0.0.1' IDENTIFIED BY '" + secret + "'",
		"GRANT ALL ON " + testenv.MariaDBDatabase + ".* TO 'pwuser'@'127.0.0.1'",
		"SET GLOBAL innodb_flush_log_at_trx_commit = 1", // for dlock fence
	} {
		if _, err := root.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	myDSN := "pwuser@tcp(" + my.Addr() + ")/" + testenv.MariaDBDatabase

	// COMMAND reads dlock's command line as any user can.
	script := `gp=$(cut -d' ' -f4 /proc/$PPID/stat); tr '\0' ' ' < /proc/$gp/cmdline`
	for _, b := range []struct {
		flag, value, env string
	}{
		{"--redis", "redis://" + redis.Addr(), "DLOCK_REDIS"},
		{"--postgres", pgURL, "DLOCK_POSTGRES"},
		{"--mysql", myDSN, "DLOCK_MYSQL"},
	} {
		t.Run(strings.TrimPrefix(b.flag, "--"), func(t *testing.T) {
			name := lockName(t)
			for _, args := range [][]string{
				{"run", b.flag, b.value, "--password-file", good, name, "--", "sh", "-c", script},
				{"elect", b.flag, b.value, "--password-file", good, name, "--", "true"},
				{"elect", "--leader", b.flag, b.value, "--password-file", good, name},
				{"inspect", b.flag, b.value, "--password-file", good, name},
				{"release", "--force", "--yes", b.flag, b.value, "--password-file", good, name},
				{"fence", "check", "--fence", "5", b.flag, b.value, "--password-file", good, "--resource", name},
			} {
				r := dlock(t, nil, args...)
				want := 0
				if args[1] == "--leader" {
					want = 3 // no leader: the election was resigned
				}
				if r.code != want || strings.Contains(r.stdout+r.stderr, secret) {
					t.Errorf("dlock %q: exit %d, stdout %q, stderr %q; want %d, no password", args, r.code, r.stdout, r.stderr, want)
				}
				if args[0] == "run" && !strings.Contains(r.stdout, "--password-file") {
					t.Errorf("COMMAND did not read dlock's command line: %q", r.stdout)
				}
			}
			// dlock fence reads the variable of the lock service too.
			r := dlock(t, []string{b.env + "=" + b.value}, "fence", "check", "--fence", "6", "--password-file", good, "--resource", name)
			if r.code != 0 {
				t.Errorf("dlock fence check with %s: exit %d, %q; want 0", b.env, r.code, r.stderr)
			}
			for _, args := range [][]string{
				{"inspect", b.flag, b.value, "--password-file", wrong, name},
				{"fence", "check", "--fence", "7", b.flag, b.value, "--password-file", wrong, "--resource", name},
			} {
				if r := dlock(t, nil, args...); r.code != 64 || !strings.Contains(r.stderr, "--password-file") {
					t.Errorf("dlock %q with a wrong password: exit %d, %q; want 64 naming --password-file", args, r.code, r.stderr)
				}
			}
		})
	}
}
