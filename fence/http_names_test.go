package fence_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// A resource name that a Redis or an SQL store cannot take is the
// client's mistake: 400 with one "fence:" and what is wrong, never 503.
// A store that fails is 503 with a body that names no table.
func TestIntegrationHandlerResourceNames(t *testing.T) {
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	path := func(r *http.Request) string { return r.URL.Path }

	rs := testenv.StartRedis(t, testenv.RedisConfig{})
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer rdb.Close()
	redisSrv := httptest.NewServer(fence.Handler(fence.NewRedis(goredisconn.New(rdb)).Store(), path, ok))
	defer redisSrv.Close()

	db := postgresDB(t)
	g := fence.NewSQL(fence.Postgres, fence.WithTable("names_fences"))
	if err := g.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	sqlSrv := httptest.NewServer(fence.Handler(g.Store(db), path, ok))
	defer sqlSrv.Close()

	for _, c := range []struct {
		url, want string
	}{
		{redisSrv.URL + "/reports/}x", "hash tag"},
		{sqlSrv.URL + "/a%00b", "NUL"},
	} {
		code, body := send(t, c.url, "5")
		if code != 400 || !strings.Contains(body, c.want) || strings.Count(body, "fence:") != 1 {
			t.Errorf("%s: %d %q; want 400 naming %q, one fence: prefix", c.url, code, body, c.want)
		}
	}

	if _, err := db.Exec("DROP TABLE names_fences"); err != nil {
		t.Fatal(err)
	}
	code, body := send(t, sqlSrv.URL+"/r", "5")
	if code != 503 || strings.Contains(body, "names_fences") || strings.Contains(body, "SQLSTATE") {
		t.Errorf("a failing store: %d %q; want 503 naming no table or SQLSTATE", code, body)
	}
}
