package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/chaos"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(t *testing.T, o Options)
		wantErr string
	}{
		{"defaults", nil, func(t *testing.T, o Options) {
			if !slices.Equal(o.Backends, chaos.Backends) || !o.AllBackends || o.Faults != nil || o.Duration != DefaultDuration ||
				o.Clients != chaos.DefaultClients || o.TTL != chaos.DefaultTTL || o.Schedule != "cycle" || o.Seed != 0 || o.Format != FormatTable {
				t.Errorf("defaults %+v", o)
			}
		}, ""},
		{"backends in their order", []string{"--backend", "zk3,redis"}, func(t *testing.T, o Options) {
			if !slices.Equal(o.Backends, []string{"redis", "zk3"}) || o.AllBackends {
				t.Errorf("backends %v, all %v", o.Backends, o.AllBackends)
			}
		}, ""},
		{"faults none", []string{"--faults", "none"}, func(t *testing.T, o Options) {
			if o.Faults == nil || len(o.Faults) != 0 || len(o.faultsFor("redis")) != 0 || o.faultsFor("redis") == nil {
				t.Errorf("faults %v, for redis %v", o.Faults, o.faultsFor("redis"))
			}
		}, ""},
		{"faults that apply", []string{"--faults", "expire,leader-kill,kill"}, func(t *testing.T, o Options) {
			if got := o.faultsFor("redis"); !slices.Equal(got, []string{"expire", "kill"}) {
				t.Errorf("for redis %v", got)
			}
			if got := o.faultsFor("zk3"); !slices.Equal(got, []string{"leader-kill", "kill"}) {
				t.Errorf("for zk3 %v", got)
			}
			if slices.Contains(o.Backends, "sentinel") || !slices.Contains(o.Backends, "redis") {
				t.Errorf("backends %v; want those the faults apply to, redis but not sentinel", o.Backends)
			}
		}, ""},
		{"postgres backends", []string{"--backend", "postgres-session,postgres"}, func(t *testing.T, o Options) {
			if !slices.Equal(o.Backends, []string{"postgres", "postgres-session"}) || o.AllBackends {
				t.Errorf("backends %v, all %v", o.Backends, o.AllBackends)
			}
		}, ""},
		{"new faults", []string{"--faults", "terminate,kill-empty-all,partition"}, func(t *testing.T, o Options) {
			for b, want := range map[string][]string{"postgres": {"terminate", "partition"},
				"postgres-session": {"terminate", "partition"}, "zk3": {"kill-empty-all"}, "redis": {"partition"}} {
				if got := o.faultsFor(b); !slices.Equal(got, want) {
					t.Errorf("for %s %v; want %v", b, got, want)
				}
			}
		}, ""},
		{"everything", []string{"--backend", "redlock5", "--duration", "2m", "--clients", "8", "--ttl", "2s", "--work", "100ms",
			"--session-timeout", "3s", "--schedule", "random", "--seed", "42", "-o", "json", "--timeline", "t.html"}, func(t *testing.T, o Options) {
			want := Options{Backends: []string{"redlock5"}, Duration: 2 * time.Minute, Clients: 8, TTL: 2 * time.Second,
				Work: 100 * time.Millisecond, SessionTimeout: 3 * time.Second, Schedule: "random", Seed: 42, Format: "json", Timeline: "t.html"}
			if !slices.Equal(o.Backends, want.Backends) || o.Duration != want.Duration || o.Clients != want.Clients || o.TTL != want.TTL ||
				o.Work != want.Work || o.SessionTimeout != want.SessionTimeout || o.Schedule != want.Schedule || o.Seed != want.Seed ||
				o.Format != want.Format || o.Timeline != want.Timeline {
				t.Errorf("got %+v\nwant %+v", o, want)
			}
		}, ""},
		{"tls", []string{"--tls"}, func(t *testing.T, o Options) {
			if !o.TLS || !slices.Equal(o.Backends, []string{"redis", "redis-aof", "redlock3", "redlock3-rdb", "redlock5", "zk3"}) {
				t.Errorf("--tls: TLS %v, backends %v; want the Redis backends but sentinel and cluster, and zk3", o.TLS, o.Backends)
			}
		}, ""},
		{"tls on cluster", []string{"--tls", "--backend", "cluster"}, nil, "--backend cluster does not run with --tls; those that do: redis,redis-aof"},
		{"unknown backend", []string{"--backend", "etcd"}, nil, `invalid value "etcd" for --backend: unknown backend etcd; choose from redis,redis-aof,redlock3,redlock3-rdb,redlock5,zk3,etcd3,postgres,postgres-session,mariadb,mariadb-session`},
		{"unknown fault", []string{"--faults", "meteor"}, nil, "unknown fault meteor; choose from"},
		{"fault for no backend", []string{"--backend", "zk3", "--faults", "expire"}, nil, "none of --faults expire applies to zk3"},
		{"terminate on redis", []string{"--backend", "redis", "--faults", "terminate"}, nil, "none of --faults terminate applies to redis"},
		{"kill-empty-all on postgres", []string{"--backend", "postgres", "--faults", "kill-empty-all"}, nil, "none of --faults kill-empty-all applies to postgres"},
		{"ttl too short", []string{"--ttl", "10ms"}, nil, "--ttl: use at least 200ms"},
		{"ttl without unit", []string{"--ttl", "5"}, nil, "a duration needs a unit, such as 5s"},
		{"work too long", []string{"--work", "400ms"}, nil, "--work 400ms is more than a quarter of --ttl 1s"},
		{"clients", []string{"--clients", "1"}, nil, "want a whole number from 2 to 32"},
		{"seed zero", []string{"--seed", "0"}, nil, "--seed: want a whole number from 1"},
		{"schedule", []string{"--schedule", "chaotic"}, nil, "want one of cycle, random"},
		{"timeline not html", []string{"--timeline", "t.png"}, nil, "give a file name ending in .html"},
		{"argument", []string{"now"}, nil, "takes no arguments"},
		{"unknown flag", []string{"--nodes", "3"}, nil, "unknown flag --nodes; run 'dlock chaos --help' for the flags"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := Parse(tt.args)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Parse(%q): %v", tt.args, err)
				}
				tt.check(t, o)
				return
			}
			if err == nil || !cmdutil.IsUsage(err) || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Parse(%q) error = %v; want one usage line containing %q", tt.args, err, tt.wantErr)
			}
		})
	}
}
