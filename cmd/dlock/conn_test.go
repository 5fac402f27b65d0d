package main_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// A flag that applies to some backends only, given with another, is a
// usage error (exit 64) naming the flag and the backends it applies to,
// before anything is contacted; it used to be ignored (--restart-window
// with a single Redis) or unknown (--table).
func TestIntegrationFlagsForOtherBackends(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--redis", "redis://127.0.0.1:1", "--restart-window", "5s"}, "--restart-window applies to Redlock only"},
		{[]string{"run", "--zk", "127.0.0.1:1", "--restart-window", "5s"}, "--restart-window applies to Redlock only"},
		{[]string{"inspect", "--postgres", "postgres://u@127.0.0.1:1/db", "--restart-window", "5s"}, "--restart-window applies to Redlock only"},
		{[]string{"run", "--redis", "redis://127.0.0.1:1", "--table", "locks"}, "--table applies to PostgreSQL and MySQL only"},
		{[]string{"run", "--etcd", "127.0.0.1:1", "--table", "locks"}, "--table applies to PostgreSQL and MySQL only"},
		{[]string{"release", "--force", "--yes", "--zk", "127.0.0.1:1", "--table", "locks"}, "--table applies to PostgreSQL and MySQL only"},
		{[]string{"run", "--postgres", "postgres://u@127.0.0.1:1/db", "--table", "bad-name"}, "--table \"bad-name\""},
		{[]string{"run", "--mysql", "u@tcp(127.0.0.1:1)/db", "--table", "a.b.c"}, "--table \"a.b.c\""},
		{[]string{"run", "--zk", "127.0.0.1:1/app/", "--zk-auth-file", "/nonexistent"}, "--zk-auth-file"},
		{[]string{"run", "--zk", "127.0.0.1:1/app//x"}, "--zk chroot"},
		{[]string{"run", "--zk", "alice@127.0.0.1:1/app"}, "credentials do not go in the address: give --zk-auth-file or DLOCK_ZK_AUTH"},
	} {
		args := append(append([]string{}, tc.args...), "name")
		if tc.args[0] == "run" {
			args = append(args, "--", "true")
		}
		r := dlock(t, nil, args...)
		if r.code != 64 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("dlock %q: exit %d, %q; want 64 saying %q", args, r.code, r.stderr, tc.want)
		}
	}
}

// A run-time parameter PostgreSQL does not know, in the URL, is a usage
// error naming the parameters of --postgres, as MySQL's is; it was exit 69,
// as if the server had failed.
func TestIntegrationPostgresUnknownParameter(t *testing.T) {
	t.Parallel()
	srv := sharedPostgres(t)
	r := dlock(t, nil, "run", "--postgres", srv.URL()+"&search_pat=x", lockName(t), "--", "true")
	if r.code != 64 || !strings.Contains(r.stderr, "search_pat") || !strings.Contains(r.stderr, "parameters of --postgres") {
		t.Errorf("an unknown parameter: exit %d, %q; want 64 naming it and the parameters of --postgres", r.code, r.stderr)
	}
}

// --table puts PostgreSQL's and MySQL's locks, and --once-per's records,
// in the table named; and 'dlock schema' prints SQL that creates the
// tables, which the database takes.
func TestIntegrationSQLTable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, db string
		d        func(testing.TB) deployment
		open     func(testing.TB) *sql.DB
		exec     func(t testing.TB, script string)
	}{
		{"PostgreSQL", "postgres", func(t testing.TB) deployment { return pgDeployment(t, false) },
			func(t testing.TB) *sql.DB { return openSQL(t, "pgx", sharedPostgres(t).URL()) },
			func(t testing.TB, script string) {
				conn, err := pgx.Connect(context.Background(), sharedPostgres(t).URL())
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(context.Background())
				if _, err := conn.Exec(context.Background(), script); err != nil {
					t.Fatalf("running the SQL of dlock schema: %v\n%s", err, script)
				}
			}},
		{"MySQL", "mysql", func(t testing.TB) deployment { return mysqlDeployment(t, false) },
			func(t testing.TB) *sql.DB { return openSQL(t, "mysql", sharedMariaDB(t).DSN()) },
			func(t testing.TB, script string) {
				db := openSQL(t, "mysql", sharedMariaDB(t).DSN())
				for _, stmt := range strings.Split(script, ";\n") {
					if strings.TrimSpace(stmt) == "" {
						continue
					}
					if _, err := db.Exec(stmt); err != nil {
						t.Fatalf("running the SQL of dlock schema: %v\n%s", err, stmt)
					}
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, db := tc.d(t), tc.open(t)
			table := "t" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
			d.flags = append(d.flags, "--table", table)
			name := lockName(t)
			rows := func(table string) int {
				var n int
				if err := db.QueryRow("SELECT COUNT(*) FROM " + table + " WHERE name = '" + name + "'").Scan(&n); err != nil {
					t.Fatalf("counting the rows of %s: %v", table, err)
				}
				return n
			}
			holder := holdInBackground(t, d, name)
			if n := rows(table); n != 1 {
				t.Errorf("table %s has %d rows while the lock is held; want 1", table, n)
			}
			if rep := inspectJSON(t, d, name); !rep.Held {
				t.Errorf("inspect --table %s: %+v; want held", table, rep)
			}
			if r := dlock(t, nil, runArgs(d, "--wait", "0", name, "--", "true")...); r.code != 75 {
				t.Errorf("a second run --table %s: exit %d, %s; want 75", table, r.code, r.stderr)
			}
			holder.signal(t, syscall.SIGINT)
			holder.wait(t, 10*time.Second)
			if r := dlock(t, nil, runArgs(d, "--once-per", "1h", name, "--", "true")...); r.code != 0 {
				t.Errorf("run --table %s --once-per: exit %d, %s", table, r.code, r.stderr)
			}
			if n := rows(table + "_runs"); n != 1 {
				t.Errorf("table %s_runs has %d rows after a run --once-per; want 1", table, n)
			}

			schema := dlock(t, nil, "schema", tc.db, "--table", table+"s")
			if schema.code != 0 || !strings.Contains(schema.stdout, "CREATE TABLE") {
				t.Fatalf("dlock schema %s: exit %d, %q, %q", tc.db, schema.code, schema.stdout, schema.stderr)
			}
			tc.exec(t, schema.stdout)
			d.flags[len(d.flags)-1] = table + "s"
			if r := dlock(t, nil, runArgs(d, "--once-per", "1h", name, "--", "true")...); r.code != 0 {
				t.Errorf("run --table %ss --once-per, made by dlock schema: exit %d, %s", table, r.code, r.stderr)
			}
			if n := rows(table + "s_runs"); n != 1 {
				t.Errorf("table %ss_runs, made by dlock schema, has %d rows after a run --once-per; want 1", table, n)
			}
		})
	}
	if r := dlock(t, nil, "schema", "redis"); r.code != 64 {
		t.Errorf("dlock schema redis: exit %d, %q; want 64", r.code, r.stderr)
	}
}

func openSQL(t testing.TB, driver, dsn string) *sql.DB {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// A chroot in the ZooKeeper connect string (host:port/app), the convention
// of ZooKeeper's own clients, puts every path below it: the lock's, and
// --once-per's record. DLOCK_ZK_AUTH=user:password authenticates as
// --zk-auth-file does, and is never echoed.
func TestIntegrationZooKeeperChroot(t *testing.T) {
	t.Parallel()
	srv := sharedZooKeeper(t)
	conn, _, err := zk.Connect([]string{srv.Addr()}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	chroot := "/" + lockName(t)
	d := deployment{flags: []string{"--zk", srv.Addr() + chroot}}
	name := lockName(t)
	holder := holdInBackground(t, d, name)
	if kids, _, err := conn.Children(chroot + "/dlock/" + name); err != nil || len(kids) == 0 {
		t.Errorf("children of %s/dlock/%s while held: %q, %v; want the holder's node", chroot, name, kids, err)
	}
	if rep := inspectJSON(t, d, name); !rep.Held {
		t.Errorf("inspect with the chroot: %+v; want held", rep)
	}
	if rep := inspectJSON(t, deployment{flags: []string{"--zk", srv.Addr()}}, name); rep.Held {
		t.Errorf("inspect without the chroot: %+v; want free (another path)", rep)
	}
	holder.signal(t, syscall.SIGINT)
	holder.wait(t, 10*time.Second)
	if r := dlock(t, nil, runArgs(d, "--once-per", "1h", name, "--", "true")...); r.code != 0 {
		t.Errorf("run --once-per with a chroot: exit %d, %s", r.code, r.stderr)
	}
	if ok, _, err := conn.Exists(chroot + "/dlock-runs/dlock/" + name); !ok || err != nil {
		t.Errorf("--once-per's record %s/dlock-runs/dlock/%s: exists %v, %v", chroot, name, ok, err)
	}

	// The ACL is read while the lock is held: once it is free, ZooKeeper's
	// container manager may delete the empty lock node at any moment.
	ready := filepath.Join(t.TempDir(), "ready")
	env := []string{"DLOCK_ZK_AUTH=alice:secret-pw", "READY=" + ready}
	authHolder := startDlock(t, env, runArgs(d, "-v", name+"-auth", "--", "sh", "-c", `echo ${DLOCK_ZK_AUTH:-unset}; touch "$READY"; exec sleep 60`)...)
	if !eventually(20*time.Second, func() bool { _, err := os.Stat(ready); return err == nil }) {
		t.Fatalf("holder with DLOCK_ZK_AUTH did not start; stderr: %s", authHolder.kill())
	}
	alice, _, err := zk.Connect([]string{srv.Addr()}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(alice.Close)
	if err := alice.AddAuth("digest", []byte("alice:secret-pw")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := conn.GetACL(chroot + "/dlock/" + name + "-auth"); err != zk.ErrNoAuth {
		t.Errorf("reading the ACL of the lock made with DLOCK_ZK_AUTH without credentials: %v; want %v", err, zk.ErrNoAuth)
	}
	acl, _, err := alice.GetACL(chroot + "/dlock/" + name + "-auth")
	if err != nil || len(acl) == 0 || acl[0].Scheme != "digest" || !strings.HasPrefix(acl[0].ID, "alice:") {
		t.Errorf("ACL of the lock made with DLOCK_ZK_AUTH: %+v, %v; want alice's digest", acl, err)
	}
	authHolder.signal(t, syscall.SIGINT)
	if r := authHolder.wait(t, 10*time.Second); r.code != 128+int(syscall.SIGINT) || strings.Contains(r.stdout+r.stderr, "secret-pw") || !strings.Contains(r.stdout, "unset") {
		t.Errorf("run with DLOCK_ZK_AUTH, stopped by SIGINT: exit %d, %q, %q; want %d, the variable kept from COMMAND, no password", r.code, r.stdout, r.stderr, 128+int(syscall.SIGINT))
	}
	if r := dlock(t, []string{"DLOCK_ZK_AUTH=alice"}, runArgs(d, name, "--", "true")...); r.code != 64 || !strings.Contains(r.stderr, "DLOCK_ZK_AUTH") {
		t.Errorf("DLOCK_ZK_AUTH without a password: exit %d, %q; want 64 naming it", r.code, r.stderr)
	}
}
