package fence_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/pglock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/dlock-go/dlock/zklock"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// resources are what the holders write to, one of each kind of guard.
type resources struct {
	Lock      string // "redis", "postgres" or "zookeeper"
	LockURL   string // the lock's Redis or ZooKeeper address, or PostgreSQL URL
	Name      string // the lock's name
	Postgres  string // a PostgreSQL URL, for the SQL guard
	MariaDB   string // a MariaDB DSN, for the SQL guard
	Table     string // the SQL guard's table, and the data's table + "_data"
	SQLite    string // a SQLite file
	Redis     string // the resource Redis's address
	HTTP      string // the URL of a service behind fence.Handler
	File      string // a file on the "shared filesystem"
	Go        string // the holder goes on writing once this file exists
	TTLMillis int
}

// holderEnv names the variable that makes the test binary a holder.
const holderEnv = "FENCE_TEST_HOLDER"

// holderMain is the first holder: it takes the lock, prints its fence,
// waits (to be stopped past its lease) until the Go file exists, then
// writes to every resource and prints each guard's verdict as JSON.
func holderMain(spec string) int {
	var r resources
	if err := json.Unmarshal([]byte(spec), &r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lease, done, err := takeLock(ctx, r)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		return 2
	}
	defer done()
	fmt.Printf("fence %d\n", lease.Fence())
	for {
		if _, err := os.Stat(r.Go); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	verdicts := map[string]string{}
	for guard, err := range writeAll(ctx, r, lease.Fence(), "A") {
		verdicts[guard] = verdict(err)
	}
	json.NewEncoder(os.Stdout).Encode(verdicts)
	return 0
}

func verdict(err error) string {
	switch {
	case err == nil:
		return "accepted"
	case errors.Is(err, fence.ErrStale):
		return "stale"
	}
	return err.Error()
}

// takeLock takes the lock named in r, with renewal on: a holder that is
// stopped stops renewing, and loses the lock after its TTL.
func takeLock(ctx context.Context, r resources) (dlock.Lease, func(), error) {
	ttl := time.Duration(r.TTLMillis) * time.Millisecond
	switch r.Lock {
	case "redis":
		rdb := redis.NewClient(&redis.Options{Addr: r.LockURL})
		c := redislock.New(goredisconn.New(rdb))
		lease, err := c.NewMutex(r.Name, redislock.WithTTL(ttl)).Lock(ctx)
		return lease, func() { c.Close(); rdb.Close() }, err
	case "zookeeper":
		c, err := zklock.New(ctx, []string{r.LockURL}, zklock.WithSessionTimeout(ttl))
		if err != nil {
			return nil, nil, err
		}
		lease, err := c.NewMutex("/fence-test/" + r.Name).Lock(ctx)
		return lease, func() { c.Close() }, err
	default:
		pool, err := pgxpool.New(ctx, r.LockURL)
		if err != nil {
			return nil, nil, err
		}
		c := pglock.New(pool)
		if err := c.Migrate(ctx); err != nil {
			return nil, nil, err
		}
		lease, err := c.NewMutex(r.Name, pglock.WithTTL(ttl)).Lock(ctx)
		return lease, func() { c.Close(); pool.Close() }, err
	}
}

// writeAll writes value under fence through every guard, and returns each
// guard's error.
func writeAll(ctx context.Context, r resources, f uint64, value string) map[string]error {
	out := map[string]error{}
	for _, d := range []struct {
		name, driver, dsn string
		dialect           fence.Dialect
	}{{"sql-postgres", "pgx", r.Postgres, fence.Postgres}, {"sql-mariadb", "mysql", r.MariaDB, fence.MySQL}, {"sql-sqlite", "sqlite", r.SQLite, fence.SQLite}} {
		db, err := sql.Open(d.driver, d.dsn)
		if err != nil {
			out[d.name] = err
			continue
		}
		g := fence.NewSQL(d.dialect, fence.WithTable(r.Table))
		out[d.name] = g.WriteFenced(ctx, db, "ledger", f, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "UPDATE "+r.Table+"_data SET v = '"+value+"'")
			return err
		})
		db.Close()
	}
	rdb := redis.NewClient(&redis.Options{Addr: r.Redis})
	out["redis"] = fence.NewRedis(goredisconn.New(rdb)).Set(ctx, "ledger", f, value)
	rdb.Close()
	resp, err := (&http.Client{Transport: &fence.Transport{Fence: f}}).Post(r.HTTP, "text/plain", strings.NewReader(value))
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
		case http.StatusConflict:
			err = fmt.Errorf("%w: %s", fence.ErrStale, body)
		default:
			err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
		}
	}
	out["http"] = err
	out["file"] = fence.WriteFile(r.File, f, []byte(value), 0o644)
	return out
}

// Two real holders, the first a process stopped with SIGSTOP past its
// lease, as a garbage collector might stop it: the second takes the lock
// and writes through every guard, and when the first wakes up and writes
// anyway, every guard refuses it and keeps the second's data. With a
// Redis lock, a PostgreSQL one and a ZooKeeper one (whose session, not
// renewed while the holder is stopped, expires).
func TestIntegrationPausedHolder(t *testing.T) {
	pg := sharedPostgres(t)
	mariaDB(t) // started
	lockRedis := testenv.StartRedis(t, testenv.RedisConfig{})
	dataRedis := testenv.StartRedis(t, testenv.RedisConfig{Persistence: true})
	sqliteFile := filepath.Join(t.TempDir(), "data.db")
	sqliteDSN := "file:" + sqliteFile + "?_pragma=busy_timeout(20000)"

	var (
		mu      sync.Mutex
		written []string
	)
	srv := httptest.NewServer(fence.Handler(fence.NewMemory(), func(r *http.Request) string { return r.URL.Path },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			written = append(written, string(b))
			mu.Unlock()
		})))
	defer srv.Close()

	zk := testenv.StartZooKeeper(t)
	for _, lock := range []struct{ kind, url string }{{"redis", lockRedis.Addr()}, {"postgres", pg.URL()}, {"zookeeper", zk.Addr()}} {
		t.Run(lock.kind+"-lock", func(t *testing.T) {
			ctx := ctxFor(t, 2*time.Minute)
			dir := t.TempDir()
			name := unique("ledger")
			r := resources{Lock: lock.kind, LockURL: lock.url, Name: name, Postgres: pg.URL(), MariaDB: mariaSrv.DSN(),
				Table: unique("fences"), SQLite: sqliteDSN, Redis: dataRedis.Addr(), HTTP: srv.URL + "/" + name,
				File: filepath.Join(dir, "ledger.txt"), Go: filepath.Join(dir, "go"), TTLMillis: 500}
			for _, d := range []struct{ driver, dsn string }{{"pgx", r.Postgres}, {"mysql", r.MariaDB}, {"sqlite", r.SQLite}} {
				db := openDB(t, d.driver, d.dsn)
				execSQL(t, db, "CREATE TABLE "+r.Table+" (resource varchar(255) PRIMARY KEY, fence bigint NOT NULL)")
				execSQL(t, db, "CREATE TABLE "+r.Table+"_data (v varchar(10))")
				execSQL(t, db, "INSERT INTO "+r.Table+"_data VALUES ('')")
			}
			dataRedis.Do("DEL", "ledger", "dlock:guard:{ledger}")
			mu.Lock()
			written = nil
			mu.Unlock()

			spec, _ := json.Marshal(r)
			a := exec.Command(os.Args[0], "-test.run=^$")
			a.Env = append(os.Environ(), holderEnv+"="+string(spec))
			a.Stderr = os.Stderr
			out, err := a.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { a.Process.Signal(syscall.SIGCONT); a.Process.Kill(); a.Wait() }()
			lines := bufio.NewScanner(out)
			if !lines.Scan() {
				t.Fatal("the first holder printed no fence")
			}
			fenceA, err := strconv.ParseUint(strings.TrimPrefix(lines.Text(), "fence "), 10, 64)
			if err != nil {
				t.Fatalf("the first holder printed %q", lines.Text())
			}
			if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			stopped := time.Now()

			// The second holder waits for the lock, which the first's lease
			// leaves when its TTL passes unrenewed.
			lease, done, err := takeLock(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			t.Logf("first holder fence %d, stopped; second holder fence %d after %v", fenceA, lease.Fence(), time.Since(stopped).Round(time.Millisecond))
			if lease.Fence() <= fenceA {
				t.Fatalf("the second holder's fence %d is not above the first's %d", lease.Fence(), fenceA)
			}
			for guard, err := range writeAll(ctx, r, lease.Fence(), "B") {
				if err != nil {
					t.Errorf("%s refused the current holder: %v", guard, err)
				}
			}

			// The first holder wakes up and writes anyway.
			if err := os.WriteFile(r.Go, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := a.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			var verdicts map[string]string
			if err := json.NewDecoder(out).Decode(&verdicts); err != nil {
				t.Fatalf("the first holder's verdicts: %v", err)
			}
			a.Wait()
			t.Logf("the stale holder's writes: %v", verdicts)
			for _, guard := range []string{"sql-postgres", "sql-mariadb", "sql-sqlite", "redis", "http", "file"} {
				if verdicts[guard] != "stale" {
					t.Errorf("%s: the stale holder's write was %q; want stale", guard, verdicts[guard])
				}
			}

			// Every resource holds the second holder's data.
			for _, d := range []struct{ driver, dsn string }{{"pgx", r.Postgres}, {"mysql", r.MariaDB}, {"sqlite", r.SQLite}} {
				var v string
				openDB(t, d.driver, d.dsn).QueryRow("SELECT v FROM " + r.Table + "_data").Scan(&v)
				if v != "B" {
					t.Errorf("%s holds %q; want B", d.driver, v)
				}
			}
			if v, _ := dataRedis.Do("GET", "ledger"); v != "B" {
				t.Errorf("Redis holds %q; want B", v)
			}
			if b, _ := os.ReadFile(r.File); string(b) != "B" {
				t.Errorf("the file holds %q; want B", b)
			}
			mu.Lock()
			defer mu.Unlock()
			if fmt.Sprint(written) != "[B]" {
				t.Errorf("the HTTP service wrote %v; want [B]", written)
			}
		})
	}
}
