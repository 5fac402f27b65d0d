package backend

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// Every backend keeps the record of dlock run --once-per, reads it back on
// its own clock, and removes it on request (ClearRun, for an operator);
// removing none is not an error, even where the table of records does not
// exist yet.
func TestIntegrationRunRecords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		f    func(t *testing.T) Flags
	}{
		{"Redis", func(t *testing.T) Flags {
			return Flags{Redis: urlList{"redis://" + testenv.StartRedis(t, testenv.RedisConfig{}).Addr()}}
		}},
		{"Redlock", func(t *testing.T) Flags {
			var f Flags
			for _, s := range testenv.StartRedisN(t, 3, testenv.RedisConfig{}) {
				f.Redis = append(f.Redis, "redis://"+s.Addr())
			}
			return f
		}},
		{"ZooKeeper", func(t *testing.T) Flags { return Flags{ZK: testenv.StartZooKeeper(t).Addr() + "/records"} }},
		{"PostgreSQL", func(t *testing.T) Flags { return Flags{Postgres: testenv.StartPostgres(t).URL(), Table: "records"} }},
		{"MySQL", func(t *testing.T) Flags { return Flags{MySQL: testenv.StartMariaDB(t).DSN(), Table: "records"} }},
		{"etcd", func(t *testing.T) Flags { return Flags{Etcd: testenv.StartEtcd(t).Addr()} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := tc.f(t)
			spec, err := f.Resolve(func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			spec.ReadOnly = true // inspect's and release's: no table made
			ro, err := Connect(ctx, spec, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			if found, err := ro.ClearRun(ctx, "nightly"); found || err != nil {
				t.Fatalf("ClearRun before any record: %v, %v; want false, nil", found, err)
			}
			spec.ReadOnly = false
			tg, err := Connect(ctx, spec, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tg.Close()
			if err := tg.RecordRun(ctx, "nightly", time.Hour); err != nil {
				t.Fatal(err)
			}
			ago, found, err := tg.LastRun(ctx, "nightly")
			if !found || err != nil || ago < 0 || ago > 10*time.Second {
				t.Fatalf("LastRun after RecordRun: %v, %v, %v; want found, a few seconds at most", ago, found, err)
			}
			if found, err := tg.ClearRun(ctx, "nightly"); !found || err != nil {
				t.Fatalf("ClearRun of a record: %v, %v; want true, nil", found, err)
			}
			if _, found, err := tg.LastRun(ctx, "nightly"); found || err != nil {
				t.Fatalf("LastRun after ClearRun: %v, %v; want none", found, err)
			}
			if found, err := tg.ClearRun(ctx, "nightly"); found || err != nil {
				t.Fatalf("ClearRun again: %v, %v; want false, nil", found, err)
			}
			if d := tg.Describe(); tc.name == "ZooKeeper" && !strings.Contains(d, "/records") {
				t.Errorf("Describe %q does not show the chroot", d)
			}
		})
	}
}
