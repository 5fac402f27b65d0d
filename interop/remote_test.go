package interop

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/redis/go-redis/v9"
)

// remotePeer is a peer in another process: a worker of testdata that
// speaks one command a line (see testdata/redispy_worker.py).
type remotePeer struct {
	t    *testing.T
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	errs *strings.Builder
}

func startRemote(t *testing.T, name string, args ...string) *remotePeer {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), nodePathEnv()...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &remotePeer{t: t, cmd: cmd, in: in, out: bufio.NewScanner(out), errs: &strings.Builder{}}
	cmd.Stderr = p.errs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(p.close)
	return p
}

// do sends one command and returns the fields of the answer after "ok".
func (p *remotePeer) do(ctx context.Context, command string) ([]string, error) {
	if _, err := fmt.Fprintln(p.in, command); err != nil {
		return nil, fmt.Errorf("%s: %v (stderr: %s)", command, err, p.errs)
	}
	got := make(chan bool, 1)
	go func() { got <- p.out.Scan() }()
	select {
	case ok := <-got:
		if !ok {
			return nil, fmt.Errorf("%s: the worker ended: %v (stderr: %s)", command, p.out.Err(), p.errs)
		}
	case <-ctx.Done():
		p.cmd.Process.Kill()
		return nil, fmt.Errorf("%s: no answer: %w", command, ctx.Err())
	}
	f := strings.Fields(p.out.Text())
	switch {
	case len(f) > 0 && f[0] == "ok":
		return f[1:], nil
	case len(f) > 0 && f[0] == "busy":
		return nil, errBusy
	}
	return nil, fmt.Errorf("%s: %s", command, p.out.Text())
}

var errBusy = fmt.Errorf("busy")

func (p *remotePeer) try(ctx context.Context) (bool, error) {
	_, err := p.do(ctx, "try")
	if err == errBusy {
		return false, nil
	}
	return err == nil, err
}

func (p *remotePeer) at(ctx context.Context, command string) (time.Time, error) {
	f, err := p.do(ctx, command)
	if err != nil {
		return time.Time{}, err
	}
	if len(f) != 1 {
		return time.Time{}, fmt.Errorf("%s: answer %q", command, f)
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	return time.Unix(0, ns), err
}

func (p *remotePeer) lock(ctx context.Context) (time.Time, error)   { return p.at(ctx, "lock") }
func (p *remotePeer) unlock(ctx context.Context) (time.Time, error) { return p.at(ctx, "unlock") }

func (p *remotePeer) count(ctx context.Context, n int) (int, error) {
	f, err := p.do(ctx, "count "+strconv.Itoa(n))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(f[0])
}

func (p *remotePeer) close() {
	if p.cmd.ProcessState != nil {
		return
	}
	fmt.Fprintln(p.in, "quit")
	p.in.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// need returns the path of a program the test needs. Without it the test
// is skipped with a message, and fails in CI (env CI set), where
// scripts/ensure-deps has installed it.
func need(t *testing.T, what, fix string, ok func() (string, bool)) string {
	path, found := ok()
	if found {
		return path
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed; in CI it must be (%s)", what, fix)
	}
	t.Skipf("skipped: %s is not installed (%s)", what, fix)
	return ""
}

// python returns a Python that imports redis: Debian's, where
// scripts/ensure-deps installs python3-redis, else the first python3 on
// PATH.
func python(t *testing.T) string {
	return need(t, "redis-py (Debian's python3-redis)", "./scripts/ensure-deps redispy", func() (string, bool) {
		for _, py := range []string{"/usr/bin/python3", "python3"} {
			if exec.Command(py, "-c", "import redis").Run() == nil {
				return py, true
			}
		}
		return "", false
	})
}

// nodeModules is where scripts/ensure-deps installs node-redlock's npm
// packages.
func nodeModules() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "dlock", "node-redlock", "node_modules")
}

func nodePathEnv() []string { return []string{"NODE_PATH=" + nodeModules()} }

// node returns the node binary, once node-redlock's packages are there.
func node(t *testing.T) string {
	return need(t, "node with the npm packages redlock 4.2.0 and ioredis 4", "./scripts/ensure-deps node-redlock", func() (string, bool) {
		n, err := exec.LookPath("node")
		if err != nil {
			return "", false
		}
		for _, pkg := range []string{"redlock", "ioredis"} {
			if _, err := os.Stat(filepath.Join(nodeModules(), pkg, "package.json")); err != nil {
				return "", false
			}
		}
		return n, true
	})
}

func hostPort(addr string) (string, string) {
	i := strings.LastIndexByte(addr, ':')
	return addr[:i], addr[i+1:]
}

var ttlMs = strconv.FormatInt(ttl.Milliseconds(), 10)

func TestIntegrationRedisPy(t *testing.T) {
	py := python(t)
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	rdb := newRDB(t, srv.Addr())
	key := "jobs:{nightly}:redispy"
	host, port := hostPort(srv.Addr())
	runPair(t, pair{key: key, rdb: rdb,
		newDlock: dlockSingle(srv.Addr(), key, rdb),
		newOther: func(t *testing.T) peer {
			return startRemote(t, py, filepath.Join("testdata", "redispy_worker.py"), host, port, key, ttlMs)
		},
		token:  tokenOf,
		values: func(ctx context.Context) []string { return valuesOn(rdb)(ctx, key) },
	})
}

func TestIntegrationNodeRedlock(t *testing.T) {
	nodeBin := node(t)
	t.Run("SingleNode", func(t *testing.T) {
		srv := testenv.StartRedis(t, testenv.RedisConfig{})
		rdb := newRDB(t, srv.Addr())
		key := "jobs:nightly:node"
		runPair(t, pair{key: key, rdb: rdb,
			newDlock: dlockSingle(srv.Addr(), key, rdb),
			newOther: func(t *testing.T) peer {
				return startRemote(t, nodeBin, filepath.Join("testdata", "redlock_worker.js"), key, ttlMs, srv.Addr())
			},
			token:  tokenOf,
			values: func(ctx context.Context) []string { return valuesOn(rdb)(ctx, key) },
		})
	})
	t.Run("Redlock", func(t *testing.T) {
		servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
		addrs := make([]string, len(servers))
		nodes := make([]*redis.Client, len(servers))
		for i, s := range servers {
			addrs[i] = s.Addr()
			nodes[i] = newRDB(t, s.Addr())
		}
		age(t, nodes)
		key := "jobs:nightly:node-redlock"
		runPair(t, pair{key: key, rdb: nodes[0],
			newDlock: dlockQuorum(addrs, key, nodes[0]),
			newOther: func(t *testing.T) peer {
				return startRemote(t, nodeBin, append([]string{filepath.Join("testdata", "redlock_worker.js"), key, ttlMs}, addrs...)...)
			},
			token:  tokenOf,
			values: func(ctx context.Context) []string { return valuesOn(nodes...)(ctx, key) },
		})
	})
}
