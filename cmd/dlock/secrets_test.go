package main_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// A secret given to dlock, in whatever shape and by whatever way, never
// appears in what dlock writes: not in its errors, its usage messages,
// its -v log lines, nor its output (issue 33). Every value below carries
// the secret; each is given to every command that takes it, as a flag
// and its value, as --flag=value, as one argument holding both (a
// quoting slip common in systemd units and container specs), as a lone
// argument where a flag was forgotten, and in the environment, with and
// without -v. Nothing listens on the ports, so each run ends early.
func TestSecretsNeverEchoed(t *testing.T) {
	t.Parallel()
	type value struct {
		flag, env string
		v         string
		secrets   []string // none may appear
	}
	const pw = "S3cretPW"
	pws := []string{pw}
	values := []value{
		{"redis", "DLOCK_REDIS", "redis://app:S3cretPW@127.0.0.1:1", pws},
		{"redis", "DLOCK_REDIS", "redis://app:S3cretPW@127.0.0.1:99999", pws},
		{"redis", "DLOCK_REDIS", "redis://app:S3c#retPW@127.0.0.1:1", []string{"S3c", "retPW"}},
		{"redis", "DLOCK_REDIS", "redis://127.0.0.1:1/0?password=S3cretPW", pws},
		{"redis", "DLOCK_REDIS", "redis://app:S3cretPW@h:1,redis://x", pws},
		{"postgres", "DLOCK_POSTGRES", "postgres://app:S3cretPW@127.0.0.1:1/db", pws},
		{"postgres", "DLOCK_POSTGRES", "postgres://app:S3cretPW@127.0.0.1:abc/db", pws},
		{"postgres", "DLOCK_POSTGRES", "postgres://127.0.0.1:1/db?password=S3cretPW&port=x", pws},
		{"postgres", "DLOCK_POSTGRES", "host=db password=S3cretPW port=abc", pws},
		{"postgres", "DLOCK_POSTGRES", "host=db password = S3cretPW port=abc", pws},
		{"postgres", "DLOCK_POSTGRES", "host=db password='S3cret PW' port=abc", []string{"S3cret", "t PW"}},
		{"postgres", "DLOCK_POSTGRES", `host=db password='S3c\'retPW' port=abc`, []string{"S3c", "retPW"}},
		{"postgres", "DLOCK_POSTGRES", "host=127.0.0.1 port=1 dbname=db user=app password=S3cretPW", pws},
		{"postgres", "DLOCK_POSTGRES", "host=db sslpassword=S3cretPW port=abc", pws},
		{"mysql", "DLOCK_MYSQL", "app:S3cretPW@tcp(127.0.0.1:1)/db", pws},
		{"mysql", "DLOCK_MYSQL", "app:S3cretPW@tcp(h)/db?timeout=abc", pws},
		{"mysql", "DLOCK_MYSQL", "app:S3cretPW@tcp(h)", pws},
		{"mysql", "DLOCK_MYSQL", "mysql://app:S3cretPW@h:abc/db", pws},
		{"mysql", "DLOCK_MYSQL", "mysql://app:S3cretPW@127.0.0.1:1/db", pws},
		{"etcd", "DLOCK_ETCD", "https://root:S3cretPW@host:2379", pws},
		{"etcd", "DLOCK_ETCD", "root:S3cretPW@host:2379", pws},
		{"etcd", "DLOCK_ETCD", "127.0.0.1:1,root:S3cretPW@h:1", pws},
		{"zk", "DLOCK_ZK", "app:S3cretPW@host:2181", pws},
		{"zk", "DLOCK_ZK", "digest:app:S3cretPW@127.0.0.1:1", pws},
	}
	commands := []struct {
		verb   []string // before the backend flag
		after  []string // after it
		shapes int      // how many of the shapes below
	}{
		{[]string{"run"}, []string{"x", "--", "true"}, 5},
		{[]string{"inspect"}, []string{"x"}, 5},
		{[]string{"run", "-v"}, []string{"x", "--", "true"}, 2},
		{[]string{"release", "--force", "--yes"}, []string{"x"}, 1},
		{[]string{"bench", "--duration", "1s"}, nil, 1},
	}
	var runs atomic.Int64
	check := func(t *testing.T, env []string, secrets []string, args ...string) {
		t.Helper()
		runs.Add(1)
		r := dlock(t, env, args...)
		for _, s := range secrets {
			if strings.Contains(r.stdout, s) || strings.Contains(r.stderr, s) {
				t.Errorf("dlock %q with env %q shows %q: exit %d, stdout %q, stderr %q", args, env, s, r.code, r.stdout, r.stderr)
			}
		}
	}
	// Two values at a time, so that the test's 400 or so runs of dlock do
	// not make it the package's longest.
	indexes := make([]int, len(values))
	for i := range indexes {
		indexes[i] = i
	}
	runConcurrently(t, 2, indexes, func(i int) string { return fmt.Sprintf("%d-%s", i, values[i].flag) }, func(t *testing.T, i int) {
		v := values[i]
		for _, c := range commands {
			shapes := []func() (args, env []string){
				func() ([]string, []string) { return []string{"--" + v.flag, v.v}, nil },
				func() ([]string, []string) { return nil, []string{v.env + "=" + v.v} },
				func() ([]string, []string) { return []string{"--" + v.flag + "=" + v.v}, nil },
				func() ([]string, []string) { return []string{"--" + v.flag + " " + v.v}, nil },
				func() ([]string, []string) { return []string{v.v}, nil },
			}
			for _, shape := range shapes[:c.shapes] {
				args, env := shape()
				check(t, env, v.secrets, append(append(append([]string{}, c.verb...), args...), c.after...)...)
			}
		}
		// elect, whose campaign may wait, only with what is refused
		// before anything is contacted.
		check(t, nil, v.secrets, "elect", "--"+v.flag+" "+v.v, "x", "--", "true")
		check(t, nil, v.secrets, "elect", "--leader", v.v, "x")
		// dlock fence takes one Redis, PostgreSQL or MySQL database.
		if v.flag == "redis" || v.flag == "postgres" || v.flag == "mysql" {
			for _, shape := range [][]string{
				{"--" + v.flag, v.v},
				{"--" + v.flag + " " + v.v},
				{v.v},
			} {
				check(t, []string{"DLOCK_FENCE=5"}, v.secrets, append(append([]string{"fence", "check"}, shape...), "--resource", "r")...)
			}
		}
	})
	// The password variables, with a URL that carries none.
	check(t, []string{"DLOCK_REDIS_PASSWORD=" + pw}, pws, "run", "-v", "--redis", "redis://127.0.0.1:1", "x", "--", "true")
	check(t, []string{"DLOCK_REDIS_PASSWORD=" + pw}, pws, "inspect", "--redis", "redis://127.0.0.1:99999", "x")
	check(t, []string{"DLOCK_REDIS_PASSWORD=" + pw, "DLOCK_FENCE=5"}, pws, "fence", "check", "--redis", "redis://127.0.0.1:1", "--resource", "r")
	t.Logf("%d runs of dlock", runs.Load())
}
