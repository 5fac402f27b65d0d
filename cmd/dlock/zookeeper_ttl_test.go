package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A dlock run that dies (kill -9) holds a ZooKeeper lock for no longer
// than --ttl and a tick of the ensemble (200ms in tests), as on the other
// backends: the command's session timeout is --ttl. Before issue 32 the
// next waiter got the lock 10.2s after the kill at --ttl 2s, the default
// session timeout.
func TestIntegrationZooKeeperDeadHolderFreesWithinTTL(t *testing.T) {
	d := zkDeployment(t)
	name := lockName(t)
	const ttl, slack = 2 * time.Second, 1500 * time.Millisecond
	holder := holdInBackground(t, d, name, "--ttl", ttl.String())
	granted := filepath.Join(t.TempDir(), "granted")
	waiter := startDlock(t, []string{"GRANTED=" + granted},
		runArgs(d, "--ttl", ttl.String(), "--wait", "60s", name, "--", "sh", "-c", `: > "$GRANTED"`)...)
	if !eventually(20*time.Second, func() bool {
		r := dlock(t, nil, append(append([]string{"inspect"}, d.flags...), "-o", "json", name)...)
		var rep struct {
			Waiters int `json:"waiters"`
		}
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &rep) == nil && rep.Waiters == 1
	}) {
		t.Fatalf("the waiter did not queue; stderr: %s", waiter.kill())
	}
	killed := time.Now()
	holder.kill()
	if r := waiter.wait(t, 30*time.Second); r.code != 0 {
		t.Fatalf("waiter: exit %d, %s", r.code, r.stderr)
	}
	st, err := os.Stat(granted)
	if err != nil {
		t.Fatal(err)
	}
	took := st.ModTime().Sub(killed)
	t.Logf("measured: the waiter ran COMMAND %v after the holder's kill -9 at --ttl %v", took.Round(time.Millisecond), ttl)
	if took > ttl+slack {
		t.Errorf("a dead holder kept the lock %v at --ttl %v; want within --ttl and %v", took, ttl, slack)
	}
}
