package backend

import (
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// Each kind of service is claimed by exactly one driver, and every driver
// has what the command needs of it.
func TestDriversClaimOneSpecEach(t *testing.T) {
	pg, err := pgxpool.ParseConfig("postgres://u@h:5432/db")
	if err != nil {
		t.Fatal(err)
	}
	r := func(addr string) *redis.Options { return &redis.Options{Addr: addr} }
	specs := map[string]Spec{
		"redis":     {Redis: []*redis.Options{r("a:1")}},
		"redlock":   {Redis: []*redis.Options{r("a:1"), r("b:1"), r("c:1")}},
		"zookeeper": {ZK: []string{"a:1"}},
		"postgres":  {Postgres: pg},
		"mysql":     {MySQL: &mysql.Config{Addr: "a:1", DBName: "db"}},
		"etcd":      {Etcd: []string{"a:1"}},
	}
	if len(drivers) != len(specs) {
		t.Errorf("%d drivers registered, want %d", len(drivers), len(specs))
	}
	for name, spec := range specs {
		var claimed []string
		for _, d := range drivers {
			if d.claims(spec) {
				claimed = append(claimed, d.name)
			}
		}
		if len(claimed) != 1 || claimed[0] != name || spec.Kind() != name {
			t.Errorf("a %s spec is claimed by %q, Kind %q", name, claimed, spec.Kind())
		}
		if n := spec.Nodes(); len(n) == 0 || n[0].Spec.Kind() == "" {
			t.Errorf("%s: nodes %+v", name, n)
		}
	}
	for _, d := range drivers {
		if d.title == "" || (d.flag != "") != (d.given != nil) || (d.flag != "") != (d.resolve != nil) || (d.flag != "" && (len(d.env) == 0 || d.example == "")) {
			t.Errorf("driver %s is incomplete: %+v", d.name, d)
		}
	}
}

// The messages that list the backends are made from the drivers, in their
// order, as they were written out before.
func TestMessagesListTheDrivers(t *testing.T) {
	none := func(string) string { return "" }
	for _, tc := range []struct {
		f    Flags
		want string
	}{
		{Flags{}, "no lock service: give --redis redis://host:port, --zk host:port, --postgres postgres://host:port/db, --mysql user:password@tcp(host:port)/db or --etcd host:port (or set DLOCK_REDIS, DLOCK_ZK, DLOCK_POSTGRES, DLOCK_MYSQL or DLOCK_ETCD)"},
		{Flags{ZK: "a:1", Etcd: "b:1"}, "more than one lock service was given (Redis, ZooKeeper, PostgreSQL, MySQL, etcd, by flags or DLOCK_REDIS/DLOCK_ZK/DLOCK_POSTGRES/DLOCK_MYSQL/DLOCK_ETCD); choose one"},
		{Flags{ZK: "a:1", Session: true}, "--session is PostgreSQL's and MySQL's session mode; it needs --postgres or --mysql"},
		{Flags{Redis: urlList{"redis://a:1"}, Table: "t"}, "--table applies to PostgreSQL and MySQL only (--postgres or --mysql), not to Redis"},
		{Flags{Redis: urlList{"redis://a:1"}, RestartWindow: time.Second}, "--restart-window applies to Redlock only (three or more --redis URLs), not to Redis"},
		{Flags{Etcd: "a:1", RestartWindow: time.Second}, "--restart-window applies to Redlock only (three or more --redis URLs), not to etcd"},
		{Flags{RedisCluster: "a:1", RedisSentinel: "b:1"}, "--redis, --redis-cluster and --redis-sentinel (or DLOCK_REDIS, DLOCK_REDIS_CLUSTER and DLOCK_REDIS_SENTINEL) name different deployments; give one"},
		{Flags{Redis: urlList{"redis://a:1", "redis://b:1"}}, "two Redis URLs: give one for a single Redis, or three or more independent masters for Redlock (a majority of two is both)"},
	} {
		_, err := tc.f.Resolve(none)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v\nwant %s", tc.f, err, tc.want)
		}
	}
	for _, d := range drivers {
		if !d.oncePer {
			t.Errorf("driver %s keeps no --once-per records; every backend must", d.name)
		}
	}
	want := []string{EnvRedis, EnvRedisPassword, EnvRedisCluster, EnvRedisSentinel, EnvRedisMaster, EnvRedisSentinelPassword, EnvZK, EnvZKAuthFile, EnvZKAuth, EnvPostgres, EnvMySQL, EnvEtcd, EnvEtcdUser, EnvEtcdPassword, EnvTLSCA, EnvTLSCert, EnvTLSKey, EnvTLSServerName}
	if got := ConnectionEnv(); len(got) != len(want) {
		t.Errorf("ConnectionEnv %q, want %q", got, want)
	} else {
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("ConnectionEnv %q, want %q", got, want)
				break
			}
		}
	}
}
