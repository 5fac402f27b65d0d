package fence_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// stores are the Store implementations under test; each call returns a
// fresh one.
func stores(t *testing.T) []struct {
	name  string
	store fence.Store
} {
	return storesWith(t)
}

// storesWith returns the Store implementations under test, made with
// opts.
func storesWith(t *testing.T, opts ...fence.Option) []struct {
	name  string
	store fence.Store
} {
	out := []struct {
		name  string
		store fence.Store
	}{{"memory", fence.NewMemory(opts...)}}
	db := sqliteDB(t)
	g := fence.NewSQL(fence.SQLite, opts...)
	if err := g.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	out = append(out, struct {
		name  string
		store fence.Store
	}{"sqlite", g.Store(db)})
	if !testing.Short() {
		pdb := postgresDB(t)
		pg := fence.NewSQL(fence.Postgres, append([]fence.Option{fence.WithTable(unique("fences"))}, opts...)...)
		if err := pg.Migrate(context.Background(), pdb); err != nil {
			t.Fatal(err)
		}
		mdb := mariaDB(t)
		// The test server flushes its log lazily, for speed: a Store
		// refuses it unless told to take the risk.
		my := fence.NewSQL(fence.MySQL, append([]fence.Option{fence.WithTable(unique("fences")), fence.AcceptFenceLoss()}, opts...)...)
		if err := my.Migrate(context.Background(), mdb); err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewClient(&redis.Options{Addr: sharedRedis(t).Addr()})
		t.Cleanup(func() { rdb.Close() })
		out = append(out, struct {
			name  string
			store fence.Store
		}{"postgres", pg.Store(pdb)}, struct {
			name  string
			store fence.Store
		}{"mariadb", my.Store(mdb)}, struct {
			name  string
			store fence.Store
		}{"redis", fence.NewRedis(goredisconn.New(rdb), opts...).Store()})
	}
	return out
}

// send makes a request to url with header Dlock-Fence set to hdr (none
// if empty) and returns the status and body.
func send(t *testing.T, url, hdr string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("PUT", url, strings.NewReader("x"))
	if hdr != "" {
		req.Header.Set(fence.Header, hdr)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body))
}

// The middleware admits the newest fence and the same again, refuses a
// lower one with 409, and a missing or garbled one with 400, per resource
// (the path), with every store.
func TestHandler(t *testing.T) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			var written []string
			var mu sync.Mutex
			h := fence.Handler(s.store, func(r *http.Request) string { return r.URL.Path }, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				written = append(written, r.URL.Path+"@"+r.Header.Get(fence.Header))
				mu.Unlock()
				fmt.Fprintln(w, "ok")
			}))
			srv := httptest.NewServer(h)
			defer srv.Close()
			a, b := "/"+unique("a"), "/"+unique("b")
			for _, c := range []struct {
				path, hdr string
				code      int
				body      string
			}{
				{a, "10", 200, "ok"},
				{a, "10", 200, "ok"},
				{a, "11", 200, "ok"},
				{a, "10", 409, "stale fence 10"},
				{b, "3", 200, "ok"}, // another resource
				{a, "", 400, "want one Dlock-Fence header"},
				{a, "ten", 400, `"ten"`},
				{a, "0", 400, `"0"`},
				{a, "-1", 400, `"-1"`},
				{a, "99999999999999999999", 400, "decimal"},
				{a, "12", 200, "ok"},
			} {
				code, body := send(t, srv.URL+c.path, c.hdr)
				if code != c.code || !strings.Contains(body, c.body) {
					t.Errorf("%s with fence %q: %d %q; want %d and %q", c.path, c.hdr, code, body, c.code, c.body)
				}
			}
			want := []string{a + "@10", a + "@10", a + "@11", b + "@3", a + "@12"}
			if fmt.Sprint(written) != fmt.Sprint(want) {
				t.Errorf("the handler saw %v; want %v", written, want)
			}
		})
	}
}

// Concurrent requests with shuffled fences: the handler runs in
// increasing fence order for each resource, whatever the store, and the
// highest fence of each burst is always admitted.
func TestHandlerConcurrent(t *testing.T) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel() // each store on a database or table of its own
			var mu sync.Mutex
			seen := map[string][]uint64{}
			h := fence.Handler(s.store, func(r *http.Request) string { return r.URL.Path }, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				f, _ := fence.Parse(r.Header.Get(fence.Header))
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) // a write that takes a while
				mu.Lock()
				seen[r.URL.Path] = append(seen[r.URL.Path], f)
				mu.Unlock()
			}))
			srv := httptest.NewServer(h)
			defer srv.Close()
			const resources, n = 4, 40
			paths := make([]string, resources)
			for i := range paths {
				paths[i] = "/" + unique("r")
			}
			var wg sync.WaitGroup
			for _, f := range rand.Perm(n) {
				for _, p := range paths {
					wg.Go(func() {
						c := &http.Client{Transport: &fence.Transport{Fence: uint64(f + 1)}}
						resp, err := c.Post(srv.URL+p, "text/plain", nil)
						if err != nil {
							t.Error(err)
							return
						}
						resp.Body.Close()
						if resp.StatusCode != 200 && resp.StatusCode != 409 {
							t.Errorf("fence %d: status %d", f+1, resp.StatusCode)
						}
					})
				}
			}
			wg.Wait()
			for _, p := range paths {
				got := seen[p]
				for i := 1; i < len(got); i++ {
					if got[i] <= got[i-1] {
						t.Fatalf("%s: admitted in the order %v", p, got)
					}
				}
				if len(got) == 0 || got[len(got)-1] != n {
					t.Fatalf("%s: admitted %v; want the highest, %d, last", p, got, n)
				}
			}
			t.Logf("admitted at %s: %v", paths[0], seen[paths[0]])
		})
	}
}

// Each store's Advance is one atomic step: of fences 1 to n racing, n is
// recorded in the end and n-1 is then stale, in every one of many rounds.
func TestStoreAdvanceAtomic(t *testing.T) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel() // each store on a database or table of its own
			ctx := ctxFor(t, time.Minute)
			const rounds, n = 20, 16
			for round := range rounds {
				res := unique(fmt.Sprint("round", round))
				var wg sync.WaitGroup
				for f := range uint64(n) {
					wg.Go(func() { s.store.Advance(ctx, res, f+1) })
				}
				wg.Wait()
				if err := s.store.Advance(ctx, res, n-1); !errors.Is(err, fence.ErrStale) {
					t.Fatalf("round %d: fence %d after %d: %v; want ErrStale", round, n-1, n, err)
				}
				if err := s.store.Advance(ctx, res, n); err != nil {
					t.Fatalf("round %d: fence %d again: %v", round, n, err)
				}
			}
		})
	}
}

// The Transport sets the header on a clone, and refuses fence 0.
func TestTransport(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Get(fence.Header) }))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	resp, err := (&http.Client{Transport: &fence.Transport{Fence: 42}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got != "42" || req.Header.Get(fence.Header) != "" {
		t.Fatalf("server saw %q, caller's request has %q; want 42 and nothing", got, req.Header.Get(fence.Header))
	}
	if _, err := (&http.Client{Transport: &fence.Transport{}}).Get(srv.URL); err == nil || !strings.Contains(err.Error(), "fence 0") {
		t.Fatalf("Transport without a fence: %v; want an error about fence 0", err)
	}
}

// A resource name the store does not take is the client's mistake: 400.
func TestHandlerResourceTooLong(t *testing.T) {
	db := sqliteDB(t)
	g := fence.NewSQL(fence.SQLite)
	if err := g.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fence.Handler(g.Store(db), func(r *http.Request) string { return r.URL.Path },
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	defer srv.Close()
	code, body := send(t, srv.URL+"/"+strings.Repeat("x", 300), "5")
	if code != 400 || !strings.Contains(body, "bytes long") {
		t.Fatalf("a 301-byte resource: %d %q; want 400 saying it is too long", code, body)
	}
}
