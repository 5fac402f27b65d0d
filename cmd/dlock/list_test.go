package main_test

import (
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// "dlock list PREFIX" shows exactly the locks held whose names start with
// PREFIX, on every backend: not a lock under PREFIX that was held and is
// free again, nor one under another prefix that PREFIX, read as a
// pattern (* of Redis's SCAN MATCH, % of SQL's LIKE), would match.
func TestIntegrationList(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		d    func(testing.TB) deployment
	}{
		{"Redis", func(t testing.TB) deployment { return redisDeployment(t, 1) }},
		{"PostgreSQL", func(t testing.TB) deployment { return pgDeployment(t, false) }},
		{"MySQL", func(t testing.TB) deployment { return mysqlDeployment(t, false) }},
		{"ZooKeeper", zkDeployment},
		{"etcd", etcdDeployment},
		{"Redlock", func(t testing.TB) deployment { return redlockDeployment(t, 2*time.Second, 2*time.Second) }},
		{"ZooKeeperChroot", func(t testing.TB) deployment {
			d := deployment{flags: []string{"--zk", sharedZooKeeper(t).Addr() + "/list-chroot"}}
			d.held = func(t testing.TB, name string) bool {
				return dlock(t, nil, append(append([]string{"inspect", "--exit-status"}, d.flags...), name)...).code == 0
			}
			return d
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			listHeldUnderPrefix(t, tc.d(t))
		})
	}
}

// listHeldUnderPrefix holds two locks under a prefix full of pattern
// characters, and one under another prefix, takes and frees a third under
// the prefix, and checks that dlock list shows exactly the held ones.
func listHeldUnderPrefix(t *testing.T, d deployment) {
	base := lockName(t)
	prefix := base + "-p*%_["
	held := []string{prefix + "a", prefix + "b/c"}
	free, other := prefix+"free", base+"-pz%x_[a"
	hold := func(name string) {
		p := startDlock(t, nil, runArgs(d, "--wait", "1m", name)...)
		if !eventually(time.Minute, func() bool { return d.held(t, name) }) {
			t.Fatalf("%s not held after a minute: %s", name, p.kill())
		}
		t.Cleanup(func() {
			p.signal(t, syscall.SIGTERM)
			if r := p.wait(t, time.Minute); r.code != 0 {
				t.Errorf("holder of %s: exit %d, %s", name, r.code, r.stderr)
			}
		})
	}
	for _, name := range append(held, other) {
		hold(name)
	}
	if r := dlock(t, nil, runArgs(d, "--wait", "1m", free, "--", "true")...); r.code != 0 {
		t.Fatalf("run %s: exit %d, %s", free, r.code, r.stderr)
	}

	list := func(prefix string) []string {
		t.Helper()
		r := dlock(t, nil, append(append([]string{"list"}, d.flags...), "--json", prefix)...)
		if r.code != 0 {
			t.Fatalf("list --json %q: exit %d, %s", prefix, r.code, r.stderr)
		}
		var rows []struct {
			Name    string `json:"name"`
			Held    bool   `json:"held"`
			Holders []struct {
				Label string `json:"label"`
			} `json:"holders"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
			t.Fatalf("list --json %q: %v in %q", prefix, err, r.stdout)
		}
		var names []string
		for _, row := range rows {
			if !row.Held || len(row.Holders) == 0 || !strings.Contains(row.Holders[0].Label, "pid") {
				t.Errorf("list --json %q: row %+v; want held, with a holder labelled by dlock run", prefix, row)
			}
			names = append(names, row.Name)
		}
		return names
	}
	if got := list(prefix); !slices.Equal(got, held) {
		t.Errorf("list %q: %q; want exactly %q", prefix, got, held)
		r := dlock(t, nil, append(append([]string{"inspect"}, d.flags...), held[0])...)
		t.Logf("inspect %s: %s %s", held[0], r.stdout, r.stderr)
	}
	if got := list(base); !slices.Equal(got, append(slices.Clone(held), other)) {
		t.Errorf("list %q: %q; want %q", base, got, append(slices.Clone(held), other))
	}
	r := dlock(t, nil, append(append([]string{"list"}, d.flags...), prefix)...)
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code != 0 || len(lines) != 3 ||
		!strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], held[0]) || !strings.HasPrefix(lines[2], held[1]) {
		t.Errorf("list %q (table): exit %d, %q, %s; want a header and the two held locks", prefix, r.code, r.stdout, r.stderr)
	}
	if r := dlock(t, nil, append(append([]string{"list"}, d.flags...), base+"-none")...); r.code != 0 || r.stdout != "" {
		t.Errorf("list with nothing held: exit %d, %q; want 0 and nothing", r.code, r.stdout)
	}
}
