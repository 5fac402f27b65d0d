package etcdlock_test

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// sentBytes returns how many bytes the etcd server at addr has sent its
// gRPC clients.
func sentBytes(t testing.TB, addr string) int64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "etcd_network_client_grpc_sent_bytes_total "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return int64(f)
		}
	}
	t.Fatal("no etcd_network_client_grpc_sent_bytes_total in /metrics")
	return 0
}

// Inspect reads the values of the keys that hold a lock, and no other's:
// 16 waiters' keys of 1 MB each are not sent. The holder's value, 1 MB
// here, is cut to 256 bytes in the Info.
func TestIntegrationInspectCapsValues(t *testing.T) {
	srv := sharedEtcd(t)
	cli := dial(t, srv.Addr())
	c := connect(t, []string{srv.Addr()})
	ctx := ctxFor(t, time.Minute)
	name := fmt.Sprintf("caps-%d", time.Now().UnixNano())
	for i := range 17 {
		if _, err := cli.Put(ctx, fmt.Sprintf("%s/%x", name, i+1), strings.Repeat(string(rune('a'+i)), 1<<20)); err != nil {
			t.Fatal(err)
		}
	}
	before := sentBytes(t, srv.Addr())
	info, err := c.Inspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	sent := sentBytes(t, srv.Addr()) - before
	t.Logf("%d holders, %d waiters, owner %d bytes long, %d bytes sent by the server", len(info.Holders), info.Waiters, len(info.Holders[0].Owner), sent)
	if len(info.Holders) != 1 || info.Waiters != 16 || len(info.Holders[0].Owner) > 300 {
		t.Errorf("Inspect = %d holders, %d waiters, the first's owner %d bytes long; want 1, 16, at most about 256", len(info.Holders), info.Waiters, len(info.Holders[0].Owner))
	}
	if sent > 2<<20 {
		t.Errorf("the server sent %d bytes for one Inspect; want the holder's 1 MB and little more", sent)
	}
	if _, err := cli.Delete(ctx, name+"/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
}
