package pglock_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// unreachable returns a pool whose server does not exist: pgxpool connects
// lazily, so only a call that gets as far as the database fails on it.
func unreachable(t *testing.T) *pgxpool.Pool {
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Bad arguments need no server: each is reported by the first call, in
// both modes, with an error that names the problem.
func TestBadArguments(t *testing.T) {
	ctx := context.Background()
	c := pglock.New(unreachable(t))
	defer c.Close()
	long := strings.Repeat("x", pglock.MaxNameBytes+1)
	tests := []struct {
		name string
		make func(kind func(*pglock.Client, string, ...pglock.Option) dlock.Locker) dlock.Locker
		want string
	}{
		{"empty name", func(k kind) dlock.Locker { return k(c, "") }, "empty lock name"},
		{"NUL in name", func(k kind) dlock.Locker { return k(c, "a\x00b") }, "contains a NUL byte"},
		{"name not UTF-8", func(k kind) dlock.Locker { return k(c, "a\xffb") }, "not valid UTF-8"},
		{"name too long", func(k kind) dlock.Locker { return k(c, long) }, "longer than the limit of 1024"},
		{"zero TTL", func(k kind) dlock.Locker { return k(c, "x", pglock.WithTTL(0)) }, "TTL 0s is outside the range 10ms to 24h0m0s"},
		{"negative TTL", func(k kind) dlock.Locker { return k(c, "x", pglock.WithTTL(-time.Second)) }, "TTL -1s is outside"},
		{"tiny TTL", func(k kind) dlock.Locker { return k(c, "x", pglock.WithTTL(5*time.Millisecond)) }, "TTL 5ms is outside"},
		{"huge TTL", func(k kind) dlock.Locker { return k(c, "x", pglock.WithTTL(25*time.Hour)) }, "TTL 25h0m0s is outside"},
		{"nil retry", func(k kind) dlock.Locker { return k(c, "x", pglock.WithRetry(nil)) }, "retry strategy is nil"},
		{"bad retry", func(k kind) dlock.Locker { return k(c, "x", pglock.WithRetry(dlock.LinearBackoff(0, 0))) }, "LinearBackoff"},
		{"nil pool", func(k kind) dlock.Locker { return k(pglock.New(nil), "x") }, "nil *pgxpool.Pool"},
		{"table with a dash", func(k kind) dlock.Locker { return k(pglock.New(unreachable(t), pglock.WithTable("my-locks")), "x") },
			`table name "my-locks" is not a valid identifier`},
		{"table with a quote", func(k kind) dlock.Locker {
			return k(pglock.New(unreachable(t), pglock.WithTable(`x"; DROP TABLE y; --`)), "x")
		},
			"is not a valid identifier"},
		{"table starting with a digit", func(k kind) dlock.Locker { return k(pglock.New(unreachable(t), pglock.WithTable("1locks")), "x") },
			"is not a valid identifier"},
		{"table in two schemas", func(k kind) dlock.Locker { return k(pglock.New(unreachable(t), pglock.WithTable("a.b.c")), "x") },
			"is not a valid identifier"},
		{"empty schema", func(k kind) dlock.Locker { return k(pglock.New(unreachable(t), pglock.WithTable(".locks")), "x") },
			"is not a valid identifier"},
		{"empty table", func(k kind) dlock.Locker { return k(pglock.New(unreachable(t), pglock.WithTable("")), "x") },
			"is not a valid identifier"},
		{"table too long", func(k kind) dlock.Locker {
			return k(pglock.New(unreachable(t), pglock.WithTable(strings.Repeat("t", 54))), "x")
		}, "the table at most 53 bytes"},
	}
	for _, tt := range tests {
		for _, m := range modes {
			t.Run(tt.name+"/"+m.name, func(t *testing.T) {
				l := tt.make(m.newLocker)
				for _, op := range []func(context.Context) (dlock.Lease, error){l.TryLock, l.Lock} {
					lease, err := op(ctx)
					if err == nil || lease != nil {
						t.Fatalf("got a lease (%v); want an error mentioning %q", err, tt.want)
					}
					if !strings.Contains(err.Error(), tt.want) || errors.Is(err, dlock.ErrNotObtained) {
						t.Fatalf("error %q does not mention %q, or matches ErrNotObtained", err, tt.want)
					}
				}
			})
		}
	}
}

type kind = func(*pglock.Client, string, ...pglock.Option) dlock.Locker

// A bad table name is reported by every call of the Client, and by
// SchemaSQL; good ones, with or without a schema, are accepted.
func TestTableNames(t *testing.T) {
	ctx := context.Background()
	bad := pglock.New(unreachable(t), pglock.WithTable("no spaces"))
	defer bad.Close()
	want := `table name "no spaces" is not a valid identifier`
	calls := map[string]error{
		"Migrate":     bad.Migrate(ctx),
		"WriteFenced": bad.WriteFenced(ctx, "r", 1, func(context.Context, pgx.Tx) error { return nil }),
		"CheckFence":  bad.CheckFence(ctx, nil, "r", 1),
	}
	_, calls["SchemaSQL"] = pglock.SchemaSQL("no spaces")
	for call, err := range calls {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error mentioning %q", call, err, want)
		}
	}
	for table, objects := range map[string][]string{
		"":                      {`"dlock_leases"`, `"dlock_leases_fence_seq"`, `"dlock_leases_fences"`},
		"Locks":                 {`"Locks"`, `"Locks_fence_seq"`, `"Locks_fences"`},
		"app.locks_2":           {`"app"."locks_2"`, `"app"."locks_2_fence_seq"`, `"app"."locks_2_fences"`},
		"_x":                    {`"_x"`},
		"s.t":                   {`"s"."t"`},
		strings.Repeat("t", 53): {`"` + strings.Repeat("t", 53) + `_fence_seq"`},
	} {
		sql, err := pglock.SchemaSQL(table)
		if err != nil {
			t.Errorf("SchemaSQL(%q): %v", table, err)
			continue
		}
		for _, o := range objects {
			if !strings.Contains(sql, o) {
				t.Errorf("SchemaSQL(%q) does not name %s", table, o)
			}
		}
	}
}

// Fences and resource names are checked before the database is asked.
func TestBadFences(t *testing.T) {
	c := pglock.New(unreachable(t))
	defer c.Close()
	ctx := context.Background()
	called := false
	write := func(context.Context, pgx.Tx) error { called = true; return nil }
	for _, tc := range []struct {
		resource string
		fence    uint64
		want     string
	}{
		{"r", 0, "fence 0 for \"r\" is not one a lease gives"},
		{"r", math.MaxInt64 + 1, "is not one a lease gives: want 1 to 2^63-1"},
		{"", 1, "empty resource name"},
		{"a\x00", 1, "resource name \"a\\x00\" contains a NUL byte"},
	} {
		for call, err := range map[string]error{
			"WriteFenced": c.WriteFenced(ctx, tc.resource, tc.fence, write),
			"CheckFence":  c.CheckFence(ctx, nil, tc.resource, tc.fence),
		} {
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, pglock.ErrStaleFence) {
				t.Errorf("%s(%q, %d) = %v; want an error mentioning %q", call, tc.resource, tc.fence, err, tc.want)
			}
		}
	}
	if called {
		t.Error("WriteFenced called write despite a bad argument")
	}
}

// Names that differ only by case, trailing spaces or Unicode normalization
// are locks of their own, in both modes and across them: names are text
// of the database's default collation, which PostgreSQL compares byte for
// byte for equality (a nondeterministic collation cannot be a database's
// default), and the advisory key is a hash of the bytes.
func TestIntegrationNames(t *testing.T) {
	pg := sharedDB(t)
	ctx := ctxFor(t, time.Minute)
	c := newClient(t, pg.URL()+"&pool_max_conns=20") // a session-mode lease keeps a connection
	tag := unique("")
	names := []string{
		"acct" + tag, "Acct" + tag, "ACCT" + tag, // case matters
		"acct" + tag + " ", "acct" + tag + "  ", "acct" + tag + "\t", // so do trailing spaces
		"e\u0301" + tag, "\u00e9" + tag, // decomposed and composed é
		"' OR 1=1; -- \\" + tag, // SQL in a name is just a name
	}
	for _, m := range modes {
		var leases []dlock.Lease
		for _, name := range names {
			l, err := m.newLocker(c, name).TryLock(ctx)
			if err != nil {
				t.Fatalf("%s: TryLock(%q): %v", m.name, name, err)
			}
			if info, err := c.Inspect(ctx, name); err != nil || !info.Held() || info.Holders[0].Owner != l.Token() {
				t.Errorf("%s: Inspect(%q) = %+v, %v; want held by %s", m.name, name, info, err, l.Token())
			}
			leases = append(leases, l)
		}
		for _, name := range names { // each is held by its own lease, and only that
			for _, other := range modes {
				if _, err := other.newLocker(c, name).TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
					t.Errorf("%s held, %s TryLock(%q): %v; want ErrNotObtained", m.name, other.name, name, err)
				}
			}
		}
		for _, l := range leases {
			if err := l.Release(ctx); err != nil {
				t.Errorf("Release(%q): %v", l.Key(), err)
			}
		}
	}
}
