package mysqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/mysqllock"
)

// Names of every length and charset are locks of their own, compared byte
// for byte, in both modes.
func TestIntegrationNames(t *testing.T) {
	srv := sharedDB(t)
	ctx := ctxFor(t, time.Minute)
	c := newClient(t, srv.DSN())
	tag := unique("")
	names := []string{
		"a" + tag, "A" + tag, // case matters
		"a" + tag + " ",                 // so do trailing spaces
		"e\u0301" + tag, "\u00e9" + tag, // decomposed and composed é
		"🔒🗝️" + tag,             // 4-byte runes
		"x\x00y" + tag,          // NUL bytes
		"' OR 1=1; -- \\" + tag, // SQL in a name is just a name
		strings.Repeat("🔒", (mysqllock.MaxNameBytes-len(tag))/4) + tag, // 1024 bytes, near enough
		strings.Repeat("n", mysqllock.MaxNameBytes-len(tag)) + tag,     // exactly the limit
	}
	for _, md := range modes {
		var leases []dlock.Lease
		for _, name := range names {
			l, err := md.newLocker(c, name).TryLock(ctx)
			if err != nil {
				t.Fatalf("%s: TryLock(%q): %v", md.name, name, err)
			}
			if l.Key() != name {
				t.Errorf("%s: Key() = %q; want %q", md.name, l.Key(), name)
			}
			info, err := c.Inspect(ctx, name)
			if err != nil || !info.Held() || info.Holders[0].Owner != l.Token() {
				t.Errorf("%s: Inspect(%q) = %+v, %v; want held by %s", md.name, name, info, err, l.Token())
			}
			leases = append(leases, l)
		}
		for _, name := range names { // each is held by its own lease, and only that
			for _, other := range modes {
				if _, err := other.newLocker(c, name).TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
					t.Errorf("%s held, %s TryLock(%q): %v; want ErrNotObtained", md.name, other.name, name, err)
				}
			}
		}
		for _, l := range leases {
			if err := l.Release(ctx); err != nil {
				t.Errorf("Release(%q): %v", l.Key(), err)
			}
		}
	}
	if n := len(mysqllock.New(nil).NewSessionMutex(strings.Repeat("🔒", 256)).LockName()); n > 64 {
		t.Errorf("GET_LOCK name of %d characters; MySQL takes 64 at most", n)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	pool, err := sql.Open("mysql", "u:p@tcp(127.0.0.1:1)/db") // never reached
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c := mysqllock.New(pool)
	defer c.Close()
	for _, tc := range []struct {
		what string
		err  error
		want string
	}{
		{"empty name", try(c.NewMutex("")), "empty lock name"},
		{"long name", try(c.NewSessionMutex(strings.Repeat("x", mysqllock.MaxNameBytes+1))), "longer than the limit of 1024"},
		{"bad UTF-8", try(c.NewMutex("\xff")), "not valid UTF-8"},
		{"short TTL", try(c.NewMutex("x", mysqllock.WithTTL(time.Millisecond))), "WithTTL"},
		{"long TTL", try(c.NewMutex("x", mysqllock.WithTTL(25*time.Hour))), "WithTTL"},
		{"negative max hold", try(c.NewMutex("x", mysqllock.WithMaxHold(-time.Second))), "WithMaxHold"},
		{"nil db", try(mysqllock.New(nil).NewMutex("x")), "nil *sql.DB"},
		{"nil db migrate", mysqllock.New(nil).Migrate(ctx), "nil *sql.DB"},
		{"bad table", mysqllock.New(pool, mysqllock.WithTable("a-b")).Migrate(ctx), `table name "a-b" is not a valid identifier`},
		{"three-part table", mysqllock.New(pool, mysqllock.WithTable("a.b.c")).Migrate(ctx), "not a valid identifier"},
		{"inspect empty", inspectErr(c, ""), "empty lock name"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.what, tc.err, tc.want)
		}
	}
	if _, err := mysqllock.SchemaSQL("bad name"); err == nil {
		t.Error("SchemaSQL accepted a bad table name")
	}
	schema, err := mysqllock.SchemaSQL("mydb.locks")
	if err != nil || !strings.Contains(schema, "CREATE TABLE IF NOT EXISTS `mydb`.`locks`") {
		t.Errorf("SchemaSQL(mydb.locks) = %q, %v", schema, err)
	}
}

func try(l dlock.Locker) error {
	_, err := l.TryLock(context.Background())
	return err
}

func inspectErr(c *mysqllock.Client, name string) error {
	_, err := c.Inspect(context.Background(), name)
	return err
}

// A DSN with the wrong password, a database that does not exist or a
// table not migrated gives an error that says what to fix.
func TestIntegrationBadDSNs(t *testing.T) {
	srv := sharedDB(t)
	ctx := ctxFor(t, time.Minute)
	base := testenv.MariaDBUser + ":%s@tcp(" + srv.Addr() + ")/%s"
	for _, tc := range []struct {
		what, dsn, want string
	}{
		{"wrong password", fmt.Sprintf(base, "wrong", testenv.MariaDBDatabase), "check the user and password of the DSN"},
		{"unknown database", fmt.Sprintf(base, testenv.MariaDBPassword, "dlock_nosuch"), "check the database name of the DSN"},
	} {
		c := newClient(t, tc.dsn)
		if err := c.Migrate(ctx); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Migrate: %v; want %q", tc.what, err, tc.want)
		}
		if _, err := c.NewMutex("x").TryLock(ctx); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: TryLock: %v; want %q", tc.what, err, tc.want)
		}
		// Waiting does not heal it: Lock fails at once, in both modes.
		for _, md := range modes {
			start := time.Now()
			_, err := md.newLocker(c, "x").Lock(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, dlock.ErrUnavailable) || time.Since(start) > 2*time.Second {
				t.Errorf("%s: %s mode Lock: %v after %v; want %q at once, not unavailable", tc.what, md.name, err, time.Since(start), tc.want)
			}
		}
		if strings.Contains(tc.what, "password") {
			if _, err := c.NewMutex("x").TryLock(ctx); strings.Contains(err.Error(), "wrong") {
				t.Errorf("the error shows the password: %v", err)
			}
		}
	}
	c := newClient(t, srv.DSN(), mysqllock.WithTable(unique("never_migrated")))
	if _, err := c.NewSessionMutex("x").TryLock(ctx); err == nil || !strings.Contains(err.Error(), "call Client.Migrate") {
		t.Errorf("TryLock on a table not migrated: %v; want a hint to Migrate", err)
	}
	for _, md := range modes {
		start := time.Now()
		_, err := md.newLocker(c, "x").Lock(ctx)
		if err == nil || !strings.Contains(err.Error(), "call Client.Migrate") || errors.Is(err, dlock.ErrUnavailable) || time.Since(start) > 2*time.Second {
			t.Errorf("%s mode Lock on a table not migrated: %v after %v; want a hint to Migrate at once", md.name, err, time.Since(start))
		}
	}
}
