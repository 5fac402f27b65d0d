package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// recorder keeps the events it observes, as "kind guard resource fence".
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Observe(e dlock.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("%v %s %s %d", e.Kind, e.Lock, e.Name, e.Fence))
	if e.Kind == dlock.EventFenceReset {
		r.events = append(r.events, fmt.Sprintf("previous %d", e.Previous))
	}
	if e.Kind == dlock.EventFenceRefused && !errors.Is(e.Err, fence.ErrStale) && !errors.Is(e.Err, fence.ErrTooHigh) {
		r.events = append(r.events, "refused without a StaleError")
	}
}

func (r *recorder) take() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := fmt.Sprint(r.events)
	r.events = nil
	return s
}

// Each guard given an observer reports every write it accepts or
// refuses, and nothing for a write it could not decide.
func TestObserver(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	rec := &recorder{}
	want := func(guard, res string) string {
		return fmt.Sprintf("[fence-accepted %[1]s %[2]s 2 fence-accepted %[1]s %[2]s 2 fence-refused %[1]s %[2]s 1]", guard, res)
	}

	mem := fence.NewMemory(fence.WithObserver(rec))
	for _, f := range []uint64{2, 2, 1} {
		mem.Advance(ctx, "r", f)
	}
	mem.Advance(ctx, "", 3) // bad input: no event
	if got := rec.take(); got != want("Memory", "r") {
		t.Errorf("memory: %s; want %s", got, want("Memory", "r"))
	}

	db := sqliteDB(t)
	g := fence.NewSQL(fence.SQLite, fence.WithObserver(rec))
	if err := g.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *sql.Tx) error { return nil }
	for _, f := range []uint64{2, 2, 1} {
		g.WriteFenced(ctx, db, "r", f, noop)
	}
	if got := rec.take(); got != want("SQL", "r") {
		t.Errorf("SQL: %s; want %s", got, want("SQL", "r"))
	}

	execSQL(t, db, "CREATE TABLE items (id text PRIMARY KEY, qty int, fence bigint NOT NULL DEFAULT 0)")
	execSQL(t, db, "INSERT INTO items (id, qty) VALUES ('x', 0)")
	row := fence.Row{Dialect: fence.SQLite, Table: "items", Observer: rec}
	for _, f := range []uint64{2, 2, 1} {
		row.Update(ctx, db, "x", f, "qty = ?", f)
	}
	row.Update(ctx, db, "missing", 3, "qty = ?", 3) // no row: no event
	if got := rec.take(); got != want("Row", "items/x") {
		t.Errorf("Row: %s; want %s", got, want("Row", "items/x"))
	}

	if testing.Short() {
		return
	}
	_, srv := redisGuard(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	rg := fence.NewRedis(goredisconn.New(rdb), fence.WithObserver(rec))
	for _, f := range []uint64{2, 2, 1} {
		rg.Set(ctx, "k", f, "v")
	}
	if got := rec.take(); got != want("Redis", "k") {
		t.Errorf("Redis: %s; want %s", got, want("Redis", "k"))
	}
}
