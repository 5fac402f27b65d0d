package fence_test

import (
	"context"
	"database/sql"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
	"path/filepath"
	"testing"

	"github.com/dlock-go/dlock/fence"
)

func BenchmarkWriteFile(b *testing.B) {
	name := filepath.Join(b.TempDir(), "f")
	for i := range b.N {
		if err := fence.WriteFile(name, uint64(i+1), []byte("value"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMemoryAdvance(b *testing.B) {
	s := fence.NewMemory()
	for i := range b.N {
		s.Advance(b.Context(), "r", uint64(i+1))
	}
}

func BenchmarkIntegrationSQLWriteFenced(b *testing.B) {
	for _, d := range databases {
		b.Run(d.name, func(b *testing.B) {
			db := d.open(b)
			g := fence.NewSQL(d.dialect, fence.WithTable(unique("fences")))
			if err := g.Migrate(b.Context(), db); err != nil {
				b.Fatal(err)
			}
			noop := func(context.Context, *sql.Tx) error { return nil }
			for i := range b.N {
				if err := g.WriteFenced(b.Context(), db, "r", uint64(i+1), noop); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIntegrationRedisSet measures the guard's script, on a server
// that does not sync its writes to disk (so AcceptFenceLoss): a server
// fit for a guard adds an fsync to each.
func BenchmarkIntegrationRedisSet(b *testing.B) {
	srv := testenv.StartRedis(b, testenv.RedisConfig{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	g := fence.NewRedis(goredisconn.New(rdb), fence.AcceptFenceLoss())
	for i := range b.N {
		if err := g.Set(b.Context(), "k", uint64(i+1), "value"); err != nil {
			b.Fatal(err)
		}
	}
}
