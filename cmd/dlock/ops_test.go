package main_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// pushed returns what the Pushgateway at url holds, in the exposition
// format.
func pushed(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// --metrics-push: a short job's metrics reach a real Pushgateway, under
// the job NAME, as they are at exit (the lease
// released), and on a lease lost before dlock exits; a group's URL puts
// them in that group.
func TestIntegrationMetricsPush(t *testing.T) {
	gw := testenv.StartPushgateway(t)
	d := redisDeployment(t, 1)

	name := lockName(t)
	r := dlock(t, nil, runArgs(d, "--metrics-push", gw, name, "--", "true")...)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing", r.code, r.stderr)
	}
	body := pushed(t, gw)
	for _, want := range []struct{ metric, labels, value string }{
		{"dlock_acquisitions_total", `result="acquired"`, "1"},
		{"dlock_holders", `job="` + name + `"`, "0"},
		{"dlock_hold_seconds_count", `kind="mutex"`, "1"},
		{"dlock_wait_seconds_count", "", "1"},
	} {
		if !hasSample(body, want.metric, name, want.labels, want.value) {
			t.Errorf("Pushgateway lacks %s{lock=%q %s} %s:\n%s", want.metric, name, want.labels, want.value, grepLines(body, "dlock_"))
		}
	}

	// A group of the user's: job nightly, label host, and the lock label
	// on the series themselves.
	name2 := lockName(t)
	r = dlock(t, nil, runArgs(d, "--metrics-push", gw+"/metrics/job/nightly/host/web1", name2, "--", "true")...)
	if r.code != 0 {
		t.Fatalf("group URL: exit %d, stderr %q", r.code, r.stderr)
	}
	if body := pushed(t, gw); !hasSample(body, "dlock_acquisitions_total", name2, `job="nightly"`, "1") || !strings.Contains(body, `host="web1"`) {
		t.Errorf("Pushgateway lacks the group job=nightly host=web1:\n%s", grepLines(body, "dlock_acquisitions_total"))
	}

	// A Pushgateway that is down: one line on stderr, without the
	// password, and COMMAND's exit code.
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	down := "http://ci:s3cret-pw@127.0.0.1:" + strconv.Itoa(port)
	r = dlock(t, nil, runArgs(d, "--metrics-push", down, lockName(t), "--", "sh", "-c", "exit 3")...)
	if r.code != 3 || strings.Count(r.stderr, "cannot update the metrics of --metrics-push") != 1 || strings.Contains(r.stderr, "s3cret-pw") {
		t.Errorf("push to a Pushgateway that is down: exit %d, stderr %q; want 3 and one line without the password", r.code, r.stderr)
	}

	// The lease is lost while COMMAND ignores SIGTERM: the loss is pushed
	// at once, before dlock exits at the end of --grace.
	name3, dir := lockName(t), t.TempDir()
	ready := filepath.Join(dir, "ready")
	const ttl, grace = 6 * time.Second, 2 * time.Second
	p := startDlock(t, []string{"READY=" + ready}, runArgs(d, "--ttl", ttl.String(), "--grace", grace.String(),
		"--metrics-push", gw, name3, "--", "sh", "-c", `trap "" TERM; touch "$READY"; sleep 60`)...)
	if !eventually(20*time.Second, func() bool { _, err := os.Stat(ready); return err == nil }) {
		t.Fatalf("command did not start; stderr: %s", p.kill())
	}
	if body := pushed(t, gw); !hasSample(body, "dlock_holders", name3, "", "1") {
		t.Errorf("the grant was not pushed: %s", grepLines(body, "dlock_holders"))
	}
	d.sabotage(t, name3)
	var seen bool
	if !eventually(ttl, func() bool {
		select {
		case <-p.exited:
			return true
		default:
		}
		seen = hasSample(pushed(t, gw), "dlock_losses_total", name3, `cause="taken_over"`, "1")
		return seen
	}) {
		t.Fatalf("no loss pushed %v after the lock was deleted", ttl)
	}
	select {
	case <-p.exited:
		if !seen {
			t.Errorf("dlock exited before the Pushgateway had the loss; stderr: %s", p.stderr.String())
		}
	default:
	}
	if r := p.wait(t, 30*time.Second); r.code != 76 {
		t.Errorf("exit %d after the loss, want 76; stderr: %s", r.code, r.stderr)
	}
	if body := pushed(t, gw); !hasSample(body, "dlock_holders", name3, "", "0") {
		t.Errorf("the exit was not pushed: %s", grepLines(body, "dlock_holders"))
	}
}

// --metrics-textfile: the file holds the metrics as they were at exit;
// a PATH dlock cannot write is a usage error (64) found before the lock
// is taken: COMMAND does not run.
func TestIntegrationMetricsTextfile(t *testing.T) {
	d := redisDeployment(t, 1)
	dir := t.TempDir()
	path := filepath.Join(dir, "dlock.prom")
	name := lockName(t)
	r := dlock(t, nil, runArgs(d, "--metrics-textfile", path, name, "--", "true")...)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing", r.code, r.stderr)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	body := string(b)
	for _, want := range []struct{ metric, labels, value string }{
		{"dlock_acquisitions_total", `result="acquired"`, "1"},
		{"dlock_holders", `kind="mutex"`, "0"},
		{"dlock_hold_seconds_count", "", "1"},
	} {
		if !hasSample(body, want.metric, name, want.labels, want.value) {
			t.Errorf("%s lacks %s{lock=%q %s} %s:\n%s", path, want.metric, name, want.labels, want.value, body)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in the textfile directory, want only dlock.prom", len(entries))
	}

	ran := filepath.Join(dir, "ran")
	for _, bad := range []string{filepath.Join(dir, "missing", "x.prom"), filepath.Join(dir, "x.txt"), dir} {
		name := lockName(t)
		r := dlock(t, []string{"RAN=" + ran}, runArgs(d, "--metrics-textfile", bad, name, "--", "sh", "-c", `touch "$RAN"`)...)
		if r.code != 64 || !strings.Contains(r.stderr, "--metrics-textfile") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("--metrics-textfile %s: exit %d, stderr %q; want 64 and one line naming --metrics-textfile", bad, r.code, r.stderr)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatalf("--metrics-textfile %s: COMMAND ran", bad)
		}
	}
}

// logLine is one line of dlock run --log-format json.
type jsonLine struct {
	Time  string   `json:"time"`
	Level string   `json:"level"`
	Msg   string   `json:"msg"`
	Lock  string   `json:"lock"`
	Kind  string   `json:"kind"`
	Fence *uint64  `json:"fence"`
	Wait  *float64 `json:"wait"`
	Held  *float64 `json:"held"`
}

// jsonLines parses every line of stderr as a JSON object.
func jsonLines(t *testing.T, stderr string) []jsonLine {
	t.Helper()
	var lines []jsonLine
	sc := bufio.NewScanner(strings.NewReader(stderr))
	for sc.Scan() {
		var l jsonLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("stderr line %q is not JSON: %v", sc.Text(), err)
		}
		if l.Time == "" || l.Level == "" || l.Msg == "" {
			t.Errorf("line %q lacks time, level or msg", sc.Text())
		}
		lines = append(lines, l)
	}
	return lines
}

// dlock run --log-format json -v writes only JSON lines to stderr: the
// lock events with the fields lock, kind, fence, wait (seconds) and held,
// and dlock's own messages; COMMAND's output is its own.
func TestIntegrationRunLogJSON(t *testing.T) {
	d := redisDeployment(t, 1)
	name := lockName(t)
	r := dlock(t, nil, runArgs(d, "--log-format", "json", "-v", name, "--", "sh", "-c", "echo out; sleep 0.1")...)
	if r.code != 0 || r.stdout != "out\n" {
		t.Fatalf("exit %d, stdout %q; stderr %s", r.code, r.stdout, r.stderr)
	}
	events := map[string]jsonLine{}
	for _, l := range jsonLines(t, r.stderr) {
		events[l.Msg] = l
	}
	for _, msg := range []string{"dlock: acquiring", "dlock: acquired", "dlock: released"} {
		l, ok := events[msg]
		if !ok {
			t.Errorf("no %q line in:\n%s", msg, r.stderr)
			continue
		}
		if l.Lock != name || l.Kind != "mutex" {
			t.Errorf("%q: lock %q kind %q, want %q and mutex", msg, l.Lock, l.Kind, name)
		}
	}
	if l := events["dlock: acquired"]; l.Fence == nil || *l.Fence == 0 || l.Wait == nil || *l.Wait < 0 || *l.Wait > 30 {
		t.Errorf("acquired: fence %v wait %v; want a fence and a wait in seconds", l.Fence, l.Wait)
	}
	if l := events["dlock: released"]; l.Held == nil || *l.Held < 0.1 || *l.Held > 30 {
		t.Errorf("released: held %v; want the hold in seconds, at least 0.1", l.Held)
	}
	var own bool
	for msg := range events {
		own = own || strings.HasPrefix(msg, "dlock: holding lock")
	}
	if !own {
		t.Errorf("dlock's own message (holding lock ...) is not a JSON line:\n%s", r.stderr)
	}

	// A bad --log-format is a usage error naming the choices.
	if r := dlock(t, nil, runArgs(d, "--log-format", "xml", name, "--", "true")...); r.code != 64 || !strings.Contains(r.stderr, "json") {
		t.Errorf("--log-format xml: exit %d, stderr %q; want 64 naming json", r.code, r.stderr)
	}
}

// The words for a kind of lock agree: what --kind takes is what the -v
// log's kind field and the metrics' kind label say, and dlock inspect
// shows the lock of that kind (a reader or writer of an rwmutex, in its
// holder's mode).
func TestIntegrationKindWordsAgree(t *testing.T) {
	d := redisDeployment(t, 1)
	dir := t.TempDir()
	for _, tc := range []struct {
		kind, inspectKind, mode string
		extra                   []string
	}{
		{"mutex", "mutex", "exclusive", nil},
		{"fair", "fair-mutex", "exclusive", nil},
		{"read", "rwmutex", "read", nil},
		{"write", "rwmutex", "write", nil},
		{"semaphore", "semaphore", "permit", []string{"--permits", "2"}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			name := lockName(t)
			prom := filepath.Join(dir, tc.kind+".prom")
			inspect := append(append([]string{binary(t), "inspect"}, d.flags...), "-o", "json", name)
			args := append(append([]string{"--kind", tc.kind}, tc.extra...), "-v", "--log-format", "json", "--metrics-textfile", prom, name, "--")
			r := dlock(t, nil, runArgs(d, append(args, inspect...)...)...)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr %s", r.code, r.stderr)
			}
			var kinds []string
			for _, l := range jsonLines(t, r.stderr) {
				if l.Kind != "" && l.Kind != tc.kind {
					t.Errorf("log line %q has kind %q, want %q", l.Msg, l.Kind, tc.kind)
				}
				kinds = append(kinds, l.Kind)
			}
			if len(kinds) == 0 {
				t.Errorf("no log line with a kind:\n%s", r.stderr)
			}
			b, _ := os.ReadFile(prom)
			if !hasSample(string(b), "dlock_acquisitions_total", name, `kind="`+tc.kind+`"`, "1") {
				t.Errorf("metrics lack kind=%q:\n%s", tc.kind, b)
			}
			var rep struct {
				Kind    string `json:"kind"`
				Holders []struct {
					Mode string `json:"mode"`
				} `json:"holders"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatalf("inspect -o json: %v in %q", err, r.stdout)
			}
			if rep.Kind != tc.inspectKind || len(rep.Holders) != 1 || rep.Holders[0].Mode != tc.mode {
				t.Errorf("inspect: %+v; want kind %q, one holder in mode %q", rep, tc.inspectKind, tc.mode)
			}
		})
	}
}
