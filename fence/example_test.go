package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// The fences of two holders of one lock: the first wrote with 41, paused,
// lost the lock, and writes again after the second wrote with 42.
const oldFence, newFence = 41, 42

// An SQL guard checks the fence in the transaction that writes, so the
// check and the write commit together or not at all.
func ExampleSQL_WriteFenced() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "fence-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", filepath.Join(dir, "shop.db"))
	defer db.Close()
	db.Exec("CREATE TABLE stock (item text PRIMARY KEY, qty int)")
	db.Exec("INSERT INTO stock VALUES ('apple', 10)")

	guard := fence.NewSQL(fence.SQLite)
	if err := guard.Migrate(ctx, db); err != nil { // or run guard.Schema() in a migration
		fmt.Println(err)
		return
	}
	setStock := func(qty int) func(context.Context, *sql.Tx) error {
		return func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "UPDATE stock SET qty = ? WHERE item = 'apple'", qty)
			return err
		}
	}
	err := guard.WriteFenced(ctx, db, "stock/apple", newFence, setStock(9))
	fmt.Println("current holder:", err)
	err = guard.WriteFenced(ctx, db, "stock/apple", oldFence, setStock(8))
	fmt.Println("stale holder:", errors.Is(err, fence.ErrStale))
	fmt.Println(err)
	var qty int
	db.QueryRow("SELECT qty FROM stock WHERE item = 'apple'").Scan(&qty)
	fmt.Println("qty:", qty)
	// Output:
	// current holder: <nil>
	// stale holder: true
	// fence: stale fence 41 for "stock/apple": a later holder of the lock has written with fence 42
	// qty: 9
}

// A row that carries its own fence needs no table of fences: the check is
// the UPDATE's WHERE clause.
func ExampleRow_Update() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "fence-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", filepath.Join(dir, "shop.db"))
	defer db.Close()
	db.Exec("CREATE TABLE stock (id text PRIMARY KEY, qty int, fence bigint NOT NULL DEFAULT 0)")
	db.Exec("INSERT INTO stock (id, qty) VALUES ('apple', 10)")

	stock := fence.Row{Dialect: fence.SQLite, Table: "stock"}
	// UPDATE stock SET qty = ?, fence = ? WHERE id = ? AND fence <= ?
	fmt.Println(stock.Update(ctx, db, "apple", newFence, "qty = ?", 9))
	fmt.Println(stock.Update(ctx, db, "apple", oldFence, "qty = ?", 8))
	// Output:
	// <nil>
	// fence: stale fence 41 for "stock/apple": a later holder of the lock has written with fence 42
}

// A service that receives writes refuses a stale holder's with 409
// Conflict; the client puts its lease's fence on every request.
func ExampleHandler() {
	save := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "saved") })
	byPath := func(r *http.Request) string { return r.URL.Path }
	srv := httptest.NewServer(fence.Handler(fence.NewMemory(), byPath, save))
	defer srv.Close()

	for _, f := range []uint64{newFence, oldFence} {
		client := &http.Client{Transport: &fence.Transport{Fence: f}} // f is lease.Fence()
		resp, err := client.Post(srv.URL+"/reports/daily", "text/csv", nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s", resp.StatusCode, body)
		fmt.Println()
	}
	// Output:
	// 200 saved
	// 409 fence: stale fence 41 for "/reports/daily": a later holder of the lock has written with fence 42
}

// A file on a shared filesystem is replaced only by a writer whose fence
// is not stale.
func ExampleWriteFile() {
	dir, _ := os.MkdirTemp("", "fence-example")
	defer os.RemoveAll(dir)
	report := filepath.Join(dir, "report.csv")

	fmt.Println(fence.WriteFile(report, newFence, []byte("new\n"), 0o644))
	err := fence.WriteFile(report, oldFence, []byte("old\n"), 0o644)
	fmt.Println("stale:", errors.Is(err, fence.ErrStale))
	b, _ := os.ReadFile(report)
	fmt.Printf("%s", b)
	// Output:
	// <nil>
	// stale: true
	// new
}

// Fenced writes to a user's own Redis keys, on any deployment: a string
// and a hash.
func ExampleRedis() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	conn := goredisconn.New(rdb)
	// The data's deployment: need not be the lock's, and must write every
	// write to disk before it answers (appendonly yes, appendfsync always).
	guard := fence.NewRedis(conn)

	lease, err := redislock.New(conn).NewMutex("daily-report").Lock(ctx)
	if err != nil {
		return
	}
	defer lease.Release(ctx)
	if err := guard.Set(ctx, "report:daily", lease.Fence(), "..."); errors.Is(err, fence.ErrStale) {
		return // a later holder has written: stop
	}
	guard.HSet(ctx, "{account:7}:balance", lease.Fence(), "eur", "12.50", "usd", "3.00")
}
