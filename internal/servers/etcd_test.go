package servers

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// etcdPut writes key=value through the gRPC gateway and returns the
// revision of the write.
func etcdPut(e *Etcd, key, value string) (int64, error) {
	body := fmt.Sprintf(`{"key":%q,"value":%q}`,
		base64.StdEncoding.EncodeToString([]byte(key)), base64.StdEncoding.EncodeToString([]byte(value)))
	resp, err := etcdHTTP.Post(e.clientURL()+"/v3/kv/put", "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Header struct {
			Revision int64 `json:"revision,string"`
		} `json:"header"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil || r.Header.Revision == 0 {
		return 0, fmt.Errorf("put answered %s %q", resp.Status, b)
	}
	return r.Header.Revision, nil
}

// etcdGet reads key through the gRPC gateway; "" if it is absent.
func etcdGet(e *Etcd, key string) (string, error) {
	body := fmt.Sprintf(`{"key":%q}`, base64.StdEncoding.EncodeToString([]byte(key)))
	resp, err := etcdHTTP.Post(e.clientURL()+"/v3/kv/range", "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Kvs []struct {
			Value []byte `json:"value"`
		} `json:"kvs"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil {
		return "", fmt.Errorf("range answered %s %q", resp.Status, b)
	}
	if len(r.Kvs) == 0 {
		return "", nil
	}
	return string(r.Kvs[0].Value), nil
}

func TestEtcdLaunchClusterRejectsBadSize(t *testing.T) {
	for _, n := range []int{-1, 0} {
		if c, err := LaunchEtcdCluster(n); err == nil {
			c.Close()
			t.Fatalf("LaunchEtcdCluster(%d) succeeded", n)
		}
	}
}

func TestIntegrationEtcdStandalone(t *testing.T) {
	t.Parallel()
	e := startEtcd(t)
	if ok, err := e.IsLeader(); err != nil || !ok {
		t.Fatalf("IsLeader = %v, %v; a standalone server leads itself", ok, err)
	}
	if _, err := etcdPut(e, "k", "v1"); err != nil {
		t.Fatal(err)
	}
	pid := e.PID()
	if err := e.Kill(); err != nil {
		t.Fatal(err)
	}
	if e.PID() != 0 || e.Health() == nil {
		t.Fatal("killed server still running or answering")
	}
	if err := e.Restart(); err != nil {
		t.Fatal(err)
	}
	if e.PID() == 0 || e.PID() == pid {
		t.Fatalf("PID after Restart = %d (was %d)", e.PID(), pid)
	}
	if v, err := etcdGet(e, "k"); err != nil || v != "v1" {
		t.Fatalf("after Restart k = %q, %v; want v1", v, err)
	}

	if err := e.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := e.Health(); err == nil {
		t.Fatal("paused server answered /health")
	}
	if err := e.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := e.Health(); err != nil {
		t.Fatalf("resumed server: %v", err)
	}
}

func TestIntegrationEtcdCluster(t *testing.T) {
	t.Parallel()
	c := startEtcdCluster(t, 3)
	leader, err := c.Leader()
	if err != nil {
		t.Fatal(err)
	}
	rev1, err := etcdPut(leader, "k", "v1")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("leader kill", func(t *testing.T) {
		if err := leader.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitHealthy(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		next, err := c.Leader()
		if err != nil {
			t.Fatal(err)
		}
		if next == leader {
			t.Fatalf("killed member %s is still the leader", leader.Name())
		}
		if _, err := etcdPut(next, "k", "v2"); err != nil {
			t.Fatal(err)
		}
		if err := leader.Restart(); err != nil {
			t.Fatal(err)
		}
		if v, err := etcdGet(leader, "k"); err != nil || v != "v2" {
			t.Fatalf("restarted member reads k = %q, %v; want v2", v, err)
		}
	})

	t.Run("follower paused", func(t *testing.T) {
		fs, err := c.Followers()
		if err != nil {
			t.Fatal(err)
		}
		if err := fs[0].Pause(); err != nil {
			t.Fatal(err)
		}
		if _, err := etcdPut(fs[1], "k", "v3"); err != nil {
			t.Fatalf("two of three members cannot write: %v", err)
		}
		if err := fs[0].Resume(); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitHealthy(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("restart every member", func(t *testing.T) {
		if err := c.Restart(); err != nil {
			t.Fatal(err)
		}
		for _, e := range c.Members {
			if v, err := etcdGet(e, "k"); err != nil || v != "v3" {
				t.Fatalf("%s reads k = %q, %v; want v3", e.Name(), v, err)
			}
		}
		l, err := c.Leader()
		if err != nil {
			t.Fatal(err)
		}
		rev, err := etcdPut(l, "k", "v4")
		if err != nil || rev <= rev1 {
			t.Fatalf("put after restart: revision %d, %v; want above %d", rev, err, rev1)
		}
	})
}

func TestEtcdSumMetric(t *testing.T) {
	text := `# HELP grpc_server_handled_total Total number of RPCs completed.
# TYPE grpc_server_handled_total counter
grpc_server_handled_total{grpc_code="OK",grpc_method="Txn",grpc_service="etcdserverpb.KV",grpc_type="unary"} 7
grpc_server_handled_total{grpc_code="OK",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 3
grpc_server_handled_total_other 100
etcd_debugging_mvcc_events_total 5
`
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"grpc_server_handled_total", nil, 10},
		{"grpc_server_handled_total", []string{`grpc_method="Txn"`}, 7},
		{"grpc_server_handled_total", []string{`grpc_method="Put"`}, 0},
		{"etcd_debugging_mvcc_events_total", nil, 5},
		{"missing", nil, 0},
	} {
		if got := sumMetric(text, c.name, c.labels); got != c.want {
			t.Errorf("sumMetric(%s, %v) = %v; want %v", c.name, c.labels, got, c.want)
		}
	}
}
