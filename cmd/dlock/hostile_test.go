package main_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// inspect shows what something else stored under a lock's key without
// letting it drive the terminal (escape sequences are quoted) and without
// reading all of a huge value.
func TestIntegrationInspectHostileValues(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	flags := []string{"--redis", "redis://" + srv.Addr()}
	fake := "\x1b[2J\x1b[1;1Hheld by nobody\x07"
	if _, err := srv.Do("SET", "dlock:{escape}", fake, "PX", "60000"); err != nil {
		t.Fatal(err)
	}
	r := dlock(t, nil, append(append([]string{"inspect"}, flags...), "escape")...)
	if r.code != 0 || strings.ContainsAny(r.stdout, "\x1b\x07") || !strings.Contains(r.stdout, `\x1b[2J`) {
		t.Errorf("inspect of a value with escape sequences: exit %d, stdout %q; want them quoted", r.code, r.stdout)
	}
	huge := strings.Repeat("x", 8<<20)
	if _, err := srv.Do("SET", "dlock:{huge}", huge, "PX", "60000"); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"table", "json"} {
		r := dlock(t, nil, append(append([]string{"inspect", "-o", format}, flags...), "huge")...)
		if r.code != 0 || len(r.stdout) > 4096 {
			t.Errorf("inspect -o %s of an 8 MiB value: exit %d, %d bytes of output; want at most 4096", format, r.code, len(r.stdout))
		}
	}
}

// Every connection dlock opens names itself (CLIENT LIST shows who holds
// locks), and a forced release leaves a note, for a day, that inspect
// shows.
func TestIntegrationForcedReleaseLeavesATrace(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	d := deployment{flags: []string{"--redis", "redis://" + srv.Addr()}}
	name := lockName(t)
	// --ttl 2s: the holder learns of the release at its next renewal,
	// a third of the TTL later.
	holder := holdInBackground(t, d, name, "--ttl", "2s")
	clients, err := srv.Do("CLIENT", "LIST")
	if err != nil || !strings.Contains(clients, "name=dlock/") {
		t.Errorf("CLIENT LIST while dlock run holds a lock: %v\n%s", err, clients)
	}
	if r := dlock(t, nil, append(append([]string{"release", "--force", "--yes"}, d.flags...), name)...); r.code != 0 {
		t.Fatalf("release --force: exit %d, %s", r.code, r.stderr)
	}
	r := dlock(t, nil, append(append([]string{"inspect", "-o", "json"}, d.flags...), name)...)
	var rep struct {
		Forced string `json:"forced"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || !strings.Contains(rep.Forced, "by dlock/") || !strings.Contains(rep.Forced, "removed 1") {
		t.Errorf("inspect after a forced release: %v, forced = %q; want who removed what", err, rep.Forced)
	}
	if pttl, _ := srv.Do("PTTL", "dlock:{"+name+"}:forced"); pttl == "-1" || pttl == "-2" {
		t.Errorf("the note's PTTL is %s; want it to expire", pttl)
	}
	if hr := holder.wait(t, 20*time.Second); hr.code != 76 {
		t.Errorf("the holder whose lock was released by force: exit %d, want 76", hr.code)
	}
}

// release --force removes dlock's holders, never a key that something else
// wrote under the lock's name.
func TestIntegrationForceReleaseLeavesForeignKeys(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	flags := []string{"--redis", "redis://" + srv.Addr()}
	if _, err := srv.Do("RPUSH", "dlock:{foreign}", "a", "b"); err != nil {
		t.Fatal(err)
	}
	r := dlock(t, nil, append(append([]string{"release", "--force", "--yes"}, flags...), "foreign")...)
	if kind, _ := srv.Do("TYPE", "dlock:{foreign}"); kind != "list" {
		t.Errorf("release --force of a name whose key is a list dlock did not write: exit %d, %q; the key is now %q", r.code, r.stderr, kind)
	}
	if r.code == 0 || !strings.Contains(r.stderr, "list") {
		t.Errorf("release --force of a foreign key: exit %d, %q; want a failure naming what the key holds", r.code, r.stderr)
	}
}

// COMMAND does not get the lock service's connection settings or
// credentials, only DLOCK_NAME, DLOCK_TOKEN and DLOCK_FENCE.
func TestIntegrationRunHidesCredentials(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t, testenv.RedisConfig{Args: []string{"--requirepass", "s3cret"}})
	env := []string{"DLOCK_REDIS=redis://:s3cret@" + srv.Addr(), "DLOCK_REDIS_PASSWORD=s3cret"}
	r := dlock(t, env, "run", lockName(t), "--", "sh", "-c", "env | grep '^DLOCK_' | sort")
	if r.code != 0 {
		t.Fatalf("exit %d, %s", r.code, r.stderr)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		name, _, _ := strings.Cut(line, "=")
		names = append(names, name)
	}
	if got := strings.Join(names, " "); got != "DLOCK_FENCE DLOCK_NAME DLOCK_TOKEN" || strings.Contains(r.stdout, "s3cret") {
		t.Errorf("COMMAND's DLOCK_ environment: %q; want only DLOCK_FENCE DLOCK_NAME DLOCK_TOKEN", r.stdout)
	}
}
