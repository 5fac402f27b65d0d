package zklock_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "embed"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// The interop tests drive Apache Curator's recipes, from Debian's
// packages (scripts/ensure-deps curator), through testdata/CuratorDriver.java,
// compiled once per test process and run as one JVM per test.

//go:embed testdata/CuratorDriver.java
var curatorDriverSource []byte

// curatorJars are the jars the driver runs on, all from Debian's packages.
var curatorJars = []string{"curator-recipes", "curator-framework", "curator-client",
	"zookeeper", "zookeeper-jute", "guava", "slf4j-api", "slf4j-nop"}

var curatorBuild struct {
	once      sync.Once
	classpath string
	err       error
}

// curatorClasspath compiles the driver, once per test process, into a
// directory under the system's temporary directory named by the source's
// hash (so later runs find it compiled), and returns the classpath to run
// it with.
func curatorClasspath() (string, error) {
	b := &curatorBuild
	b.once.Do(func() {
		var jars []string
		for _, j := range curatorJars {
			p := filepath.Join("/usr/share/java", j+".jar")
			if _, err := os.Stat(p); err != nil {
				b.err = fmt.Errorf("Curator interop tests need %s (run scripts/ensure-deps curator, or apt-get install libcurator-recipes-java)", p)
				return
			}
			jars = append(jars, p)
		}
		for _, tool := range []string{"javac", "java"} {
			if _, err := exec.LookPath(tool); err != nil {
				b.err = fmt.Errorf("Curator interop tests need %s (run scripts/ensure-deps curator, or apt-get install default-jdk-headless)", tool)
				return
			}
		}
		sum := sha256.Sum256(curatorDriverSource)
		dir := filepath.Join(os.TempDir(), "dlock-curator-driver-"+hex.EncodeToString(sum[:8]))
		cp := dir + ":" + strings.Join(jars, ":")
		if _, err := os.Stat(filepath.Join(dir, "CuratorDriver.class")); err == nil {
			b.classpath = cp
			return
		}
		tmp, err := os.MkdirTemp(os.TempDir(), "dlock-curator-build-")
		if err != nil {
			b.err = err
			return
		}
		defer os.RemoveAll(tmp)
		src := filepath.Join(tmp, "CuratorDriver.java")
		if err := os.WriteFile(src, curatorDriverSource, 0o644); err != nil {
			b.err = err
			return
		}
		out, err := exec.Command("javac", "-nowarn", "-d", filepath.Join(tmp, "classes"), "-cp", strings.Join(jars, ":"), src).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("javac CuratorDriver.java: %v: %s", err, out)
			return
		}
		// Another test process may have got there first: either copy is whole.
		if err := os.Rename(filepath.Join(tmp, "classes"), dir); err != nil {
			if _, statErr := os.Stat(filepath.Join(dir, "CuratorDriver.class")); statErr != nil {
				b.err = err
				return
			}
		}
		b.classpath = cp
	})
	return b.classpath, b.err
}

// A curator is one JVM running Curator's recipes on one CuratorFramework
// client (one session), driven command by command, for the test t (see
// sub).
type curator struct {
	*jvm
	t testing.TB
}

type jvm struct {
	in   io.WriteCloser
	mu   sync.Mutex
	next int
	wait map[string]chan string
	ids  int
}

// sub returns c for the test t, a subtest of c's, which its failures fail.
func (c *curator) sub(t testing.TB) *curator { return &curator{c.jvm, t} }

// startCurator starts a JVM with a Curator client connected to servers,
// stopped when t ends. A missing JDK or Curator jar skips the test, or
// fails it when CI is set.
func startCurator(t testing.TB, servers []string) *curator {
	t.Helper()
	cp, err := curatorClasspath()
	if err != nil {
		if ci := os.Getenv("CI"); strings.EqualFold(ci, "true") || ci == "1" {
			t.Fatalf("%v (CI is set, so this is a failure)", err)
		}
		t.Skipf("%v", err)
	}
	cmd := exec.Command("java", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp, "CuratorDriver")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the Curator driver: %v", err)
	}
	c := &curator{&jvm{in: in, wait: map[string]chan string{}}, t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			tag, rest, _ := strings.Cut(sc.Text(), " ")
			c.mu.Lock()
			ch := c.wait[tag]
			delete(c.wait, tag)
			c.mu.Unlock()
			if ch != nil {
				ch <- rest
			}
		}
	}()
	t.Cleanup(func() {
		in.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
		cmd.Wait()
		if t.Failed() {
			t.Logf("Curator driver's stderr:\n%s", stderr.String())
		}
	})
	c.do("connect", strings.Join(servers, ","))
	return c
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// send sends a command and returns the channel its answer comes on.
func (c *curator) send(args ...string) <-chan string {
	c.mu.Lock()
	c.next++
	tag := strconv.Itoa(c.next)
	ch := make(chan string, 1)
	c.wait[tag] = ch
	c.mu.Unlock()
	if _, err := fmt.Fprintln(c.in, tag+" "+strings.Join(args, " ")); err != nil {
		c.t.Errorf("sending %v to the Curator driver: %v", args, err)
	}
	return ch
}

// do sends a command and returns its answer, failing the test on an error
// or no answer in 30 seconds.
func (c *curator) do(args ...string) string {
	c.t.Helper()
	return c.answer(c.send(args...), args)
}

func (c *curator) answer(ch <-chan string, args []string) string {
	c.t.Helper()
	select {
	case a := <-ch:
		if strings.HasPrefix(a, "error") {
			c.t.Fatalf("Curator %v: %s", args, a)
		}
		return a
	case <-time.After(30 * time.Second):
		c.t.Fatalf("Curator %v: no answer in 30s", args)
	}
	return ""
}

// newLock makes a Curator recipe (mutex, rw, sem or latch) on path and
// returns its id.
func (c *curator) newLock(recipe, path string, args ...string) string {
	c.t.Helper()
	c.mu.Lock()
	c.ids++
	id := recipe + strconv.Itoa(c.ids)
	c.mu.Unlock()
	c.do(append([]string{recipe, id, path}, args...)...)
	return id
}

// ms is a wait for the driver's acquire commands.
func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// curatorPair gives a test a zklock Client and a Curator client (one JVM)
// on the shared server, and a path of its own.
func curatorPair(t *testing.T) (zc *zklock.Client, cur *curator, path string, adm *zk.Conn) {
	t.Helper()
	servers := []string{sharedZK(t).Addr()}
	cur = startCurator(t, servers)
	return connect(t, servers), cur, uniquePath(t), admin(t, servers)
}

// waitsFor fails the test if ch has an outcome within d.
func waitsFor[T any](t *testing.T, ch <-chan T, d time.Duration, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned %v; want it to wait", what, r)
	case <-time.After(d):
	}
}

// got returns what ch gives, or fails the test after 20s.
func got[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not return within 20s", what)
	}
	var zero T
	return zero
}

// refused fails the test unless a zklock TryLock is refused with
// ErrNotObtained.
func refused(t *testing.T, ctx context.Context, l dlock.Locker, what string) {
	t.Helper()
	if lease, err := l.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) || errors.Is(err, dlock.ErrKindMismatch) {
		if lease != nil {
			lease.Release(ctx)
		}
		t.Fatalf("zklock TryLock %s = %v, %v; want ErrNotObtained", what, lease, err)
	}
}

func mustTake(t *testing.T, ctx context.Context, l dlock.Locker, what string) dlock.Lease {
	t.Helper()
	lease, err := l.TryLock(ctx)
	if err != nil {
		t.Fatalf("zklock TryLock %s: %v", what, err)
	}
	return lease
}

// A Curator InterProcessMutex and a zklock Mutex on one path exclude each
// other both ways, and each takes over at the other's release.
func TestIntegrationCuratorMutex(t *testing.T) {
	zc, cur, path, _ := curatorPair(t)
	ctx := ctxFor(t, time.Minute)
	m := zc.NewMutex(path)
	c := cur.newLock("mutex", path)

	if a := cur.do("lock", c, "-1"); a != "ok" {
		t.Fatalf("Curator lock: %s", a)
	}
	refused(t, ctx, m, "Mutex while Curator's mutex holds")
	w := lockLater(ctx, m)
	waitsFor(t, w, 300*time.Millisecond, "zklock Mutex.Lock while Curator's mutex holds")
	cur.do("unlock", c)
	r := got(t, w, "zklock Mutex.Lock after Curator's release")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if a := cur.do("lock", c, "300"); a != "timeout" {
		t.Fatalf("Curator lock while zklock's Mutex holds = %s; want timeout", a)
	}
	cw := cur.send("lock", c, "-1")
	waitsFor(t, cw, 300*time.Millisecond, "Curator lock while zklock's Mutex holds")
	if err := r.lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if a := got(t, cw, "Curator lock after zklock's release"); a != "ok" {
		t.Fatalf("Curator lock after zklock's release = %s", a)
	}
	cur.do("unlock", c)
}

// A Curator InterProcessReadWriteLock and a zklock RWMutex on one path are
// one lock: a writer of either side excludes readers and writers of the
// other, both ways, and readers of both hold together. Before zklock named
// its nodes as Curator does, zklock refused Curator's nodes as no lock's,
// and Curator sorted zklock's after its own and took the lock beside a
// zklock writer.
func TestIntegrationCuratorRWMutex(t *testing.T) {
	zc, cur, path, _ := curatorPair(t)
	ctx := ctxFor(t, 2*time.Minute)
	rw := zc.NewRWMutex(path)
	c := cur.newLock("rw", path)

	// Curator's writer holds: zklock's writer and reader wait.
	if a := cur.do("write", c, "-1"); a != "ok" {
		t.Fatalf("Curator write lock: %s", a)
	}
	refused(t, ctx, rw.Writer(), "writer while Curator's writer holds")
	refused(t, ctx, rw.Reader(), "reader while Curator's writer holds")
	w := lockLater(ctx, rw.Writer())
	waitsFor(t, w, 300*time.Millisecond, "zklock writer's Lock while Curator's writer holds")
	cur.do("unwrite", c)
	r := got(t, w, "zklock writer's Lock after Curator's release")
	if r.err != nil {
		t.Fatal(r.err)
	}

	// zklock's writer holds: Curator's writer and reader wait.
	c2 := cur.newLock("rw", path)
	if a := cur.do("write", c2, "300"); a != "timeout" {
		t.Fatalf("Curator write lock while zklock's writer holds = %s; want timeout", a)
	}
	if a := cur.do("read", c2, "300"); a != "timeout" {
		t.Fatalf("Curator read lock while zklock's writer holds = %s; want timeout", a)
	}
	cr := cur.send("read", c2, "-1")
	waitsFor(t, cr, 300*time.Millisecond, "Curator read lock while zklock's writer holds")
	if err := r.lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if a := got(t, cr, "Curator read lock after zklock's release"); a != "ok" {
		t.Fatalf("Curator read lock after zklock's writer's release = %s", a)
	}

	// Readers of both hold together; writers of both wait for them.
	zr := mustTake(t, ctx, rw.Reader(), "reader beside Curator's reader")
	if a := cur.do("read", c, "2000"); a != "ok" {
		t.Fatalf("a second Curator read lock beside zklock's reader = %s; want ok", a)
	}
	refused(t, ctx, rw.Writer(), "writer while readers of both hold")
	if a := cur.do("write", c2, "300"); a != "timeout" {
		t.Fatalf("Curator write lock while readers of both hold = %s; want timeout", a)
	}
	cur.do("unread", c)
	cur.do("unread", c2)
	refused(t, ctx, rw.Writer(), "writer while zklock's reader holds")
	cw := cur.send("write", c, "-1")
	waitsFor(t, cw, 300*time.Millisecond, "Curator write lock while zklock's reader holds")
	if err := zr.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if a := got(t, cw, "Curator write lock after zklock's reader's release"); a != "ok" {
		t.Fatalf("Curator write lock after zklock's reader's release = %s", a)
	}
	cur.do("unwrite", c)

	// A downgraded zklock writer lets zklock's readers in, not Curator's,
	// which do not read the mark (as doc.go says); they get in at its
	// release.
	zw := mustTake(t, ctx, rw.Writer(), "writer on a free lock")
	zd, err := rw.Downgrade(ctx, zw)
	if err != nil {
		t.Fatal(err)
	}
	zr2 := mustTake(t, ctx, rw.Reader(), "reader beside a downgraded writer")
	if a := cur.do("read", c, "300"); a != "timeout" {
		t.Fatalf("Curator read lock beside a downgraded zklock writer = %s; want timeout", a)
	}
	cr = cur.send("read", c, "-1")
	if err := zd.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if a := got(t, cr, "Curator read lock after the downgraded writer's release"); a != "ok" {
		t.Fatalf("Curator read lock after the downgraded writer's release = %s", a)
	}
	cur.do("unread", c)
	if err := zr2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A Curator InterProcessSemaphoreV2 and a zklock Semaphore of as many
// permits on one path never have more holders together than permits, both
// ways, and each side takes a permit the other gives back. Before zklock
// took Curator's leases too, each counted only its own holders: two held
// a one-permit semaphore.
func TestIntegrationCuratorSemaphore(t *testing.T) {
	zc, cur, _, _ := curatorPair(t)
	for _, permits := range []int{1, 2} {
		t.Run(fmt.Sprint(permits), func(t *testing.T) {
			cur := cur.sub(t)
			path := uniquePath(t)
			ctx := ctxFor(t, 2*time.Minute)
			sem := zc.NewSemaphore(path, permits)
			c := cur.newLock("sem", path, strconv.Itoa(permits))

			// Curator holds all but one; a zklock lease fills the
			// semaphore; then neither side gets another.
			for range permits - 1 {
				if a := cur.do("lease", c, "5000"); a != "ok" {
					t.Fatalf("Curator lease on a free semaphore = %s", a)
				}
			}
			z := mustTake(t, ctx, sem, "the last free permit")
			refused(t, ctx, sem, "a permit of a full semaphore")
			if a := cur.do("lease", c, "300"); a != "timeout" {
				t.Fatalf("Curator lease of a semaphore full of zklock's and Curator's = %s; want timeout", a)
			}
			cw := cur.send("lease", c, "-1")
			waitsFor(t, cw, 300*time.Millisecond, "Curator lease while zklock's lease fills the semaphore")
			if err := z.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if a := got(t, cw, "Curator lease after zklock's release"); a != "ok" {
				t.Fatalf("Curator lease after zklock's release = %s", a)
			}

			// Curator's leases fill it: zklock waits, and takes the one
			// Curator gives back.
			refused(t, ctx, sem, "a permit while Curator's leases fill the semaphore")
			w := lockLater(ctx, sem)
			waitsFor(t, w, 300*time.Millisecond, "zklock Semaphore.Lock while Curator's leases fill it")
			cur.do("unlease", c)
			r := got(t, w, "zklock Semaphore.Lock after Curator's release")
			if r.err != nil {
				t.Fatal(r.err)
			}
			if a := cur.do("lease", c, "300"); a != "timeout" {
				t.Fatalf("Curator lease while zklock's lease fills the semaphore again = %s; want timeout", a)
			}
			if err := r.lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			for range permits - 1 {
				cur.do("unlease", c)
			}
		})
	}
}

// call sends a command and returns its answer, or an error for an error
// answer or none in 30 seconds; for goroutines, which must not stop the
// test.
func (c *curator) call(args ...string) (string, error) {
	select {
	case a := <-c.send(args...):
		if strings.HasPrefix(a, "error") {
			return "", fmt.Errorf("Curator %v: %s", args, a)
		}
		return a, nil
	case <-time.After(30 * time.Second):
		return "", fmt.Errorf("Curator %v: no answer in 30s", args)
	}
}

// Holders from both sides, two of each, take turns incrementing a counter
// the non-atomic way (read, pause, write), 100 times each side per kind:
// no two hold at once and no update is lost, for Curator's
// InterProcessMutex beside zklock's Mutex, its write lock beside zklock's
// RWMutex writer, and its one-lease semaphore beside zklock's.
func TestIntegrationCuratorSharedCounter(t *testing.T) {
	servers := []string{sharedZK(t).Addr()}
	cur := startCurator(t, servers)
	const perSide, rounds = 2, 50 // 100 acquisitions a side
	for _, tc := range []struct {
		name                     string
		zk                       func(c *zklock.Client, path string) dlock.Locker
		recipe, acquire, release string
		args                     []string
	}{
		{"Mutex", func(c *zklock.Client, p string) dlock.Locker { return c.NewMutex(p) }, "mutex", "lock", "unlock", nil},
		{"RWMutex", func(c *zklock.Client, p string) dlock.Locker { return c.NewRWMutex(p).Writer() }, "rw", "write", "unwrite", nil},
		{"Semaphore", func(c *zklock.Client, p string) dlock.Locker { return c.NewSemaphore(p, 1) }, "sem", "lease", "unlease", []string{"1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := cur.sub(t)
			path := uniquePath(t)
			ctx := ctxFor(t, 2*time.Minute)
			file := filepath.Join(t.TempDir(), "counter")
			if err := os.WriteFile(file, []byte("0"), 0o644); err != nil {
				t.Fatal(err)
			}
			var holders, overlaps atomic.Int32
			var writes atomic.Int64
			critical := func() error {
				if holders.Add(1) != 1 {
					overlaps.Add(1)
				}
				defer holders.Add(-1)
				b, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				v, err := strconv.Atoi(string(b))
				if err != nil {
					return err
				}
				time.Sleep(100 * time.Microsecond)
				// Replaced whole, so that an overlap loses an update
				// rather than showing a half-written file.
				tmp := fmt.Sprintf("%s.%d", file, writes.Add(1))
				if err := os.WriteFile(tmp, []byte(strconv.Itoa(v+1)), 0o644); err != nil {
					return err
				}
				return os.Rename(tmp, file)
			}
			start := time.Now()
			var wg sync.WaitGroup
			for i := range perSide {
				l := tc.zk(connect(t, servers), path)
				id := cur.newLock(tc.recipe, path, tc.args...)
				wg.Add(2)
				go func() {
					defer wg.Done()
					for range rounds {
						lease, err := l.Lock(ctx)
						if err != nil {
							t.Errorf("zklock %s %d: %v", tc.name, i, err)
							return
						}
						if err := critical(); err != nil {
							t.Error(err)
						}
						if err := lease.Release(ctx); err != nil {
							t.Errorf("zklock %s %d: Release: %v", tc.name, i, err)
							return
						}
					}
				}()
				go func() {
					defer wg.Done()
					for range rounds {
						if a, err := cur.call(tc.acquire, id, "-1"); err != nil || a != "ok" {
							t.Errorf("Curator %s %d: %q, %v", tc.name, i, a, err)
							return
						}
						if err := critical(); err != nil {
							t.Error(err)
						}
						if _, err := cur.call(tc.release, id); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b, _ := os.ReadFile(file)
			want := 2 * perSide * rounds
			t.Logf("%s: %d acquisitions (%d a side) in %v: %d overlaps, counter %s", tc.name, want, want/2, time.Since(start).Round(time.Millisecond), overlaps.Load(), b)
			if overlaps.Load() != 0 || string(b) != strconv.Itoa(want) {
				t.Errorf("%s: %d overlaps and a counter of %s after %d acquisitions; want 0 and %d", tc.name, overlaps.Load(), b, want, want)
			}
		})
	}
}

// Curator lists zklock's holders among its own participants: a Mutex's
// node, an RWMutex writer's (named as Curator's writers are) and a
// Semaphore's lease (in Curator's leases, with the holder's token). A
// zklock that used another path, node name or layout than Curator's would
// not be listed.
func TestIntegrationCuratorSeesZklockNodes(t *testing.T) {
	zc, cur, path, adm := curatorPair(t)
	ctx := ctxFor(t, time.Minute)
	participants := func(cur *curator, id string) []string {
		cur.t.Helper()
		a := strings.TrimPrefix(cur.do("nodes", id), "ok")
		if a = strings.TrimSpace(a); a == "" {
			return nil
		}
		return strings.Split(a, ",")
	}
	for _, tc := range []struct {
		name, recipe string
		args         []string
		locker       dlock.Locker
		node         func(l *zklock.Lease, nodes []string) bool
	}{
		{"Mutex", "mutex", nil, zc.NewMutex(path + "/mutex"), func(l *zklock.Lease, nodes []string) bool {
			return len(nodes) == 1 && nodes[0] == l.Path()
		}},
		{"RWMutex", "rw", nil, zc.NewRWMutex(path + "/rw").Writer(), func(l *zklock.Lease, nodes []string) bool {
			return len(nodes) == 1 && nodes[0] == l.Path() && strings.Contains(l.Path(), "-__WRIT__")
		}},
		{"Semaphore", "sem", []string{"3"}, zc.NewSemaphore(path+"/sem", 3), func(l *zklock.Lease, nodes []string) bool {
			// Curator names a semaphore's participants by node name alone.
			if len(nodes) != 1 || !strings.HasPrefix(nodes[0], "_c_") {
				return false
			}
			data, _, err := adm.Get(path + "/sem/leases/" + nodes[0])
			return err == nil && string(data) == l.Token()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := cur.sub(t)
			lease, err := tc.locker.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			id := cur.newLock(tc.recipe, tc.locker.Name(), tc.args...)
			if nodes := participants(cur, id); !tc.node(lease.(*zklock.Lease), nodes) {
				t.Errorf("Curator's participants of %s = %v while zklock's %s holds with node %s", tc.locker.Name(), nodes, tc.name, lease.(*zklock.Lease).Path())
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if nodes := participants(cur, id); len(nodes) != 0 {
				t.Errorf("Curator's participants of %s = %v after zklock's release; want none", tc.locker.Name(), nodes)
			}
		})
	}
}

// A Curator LeaderSelector (built on InterProcessMutex) and a zklock
// Election on one path elect one leader: each campaigns in vain while the
// other leads, and wins once the other resigns.
func TestIntegrationCuratorLeaderSelector(t *testing.T) {
	zc, cur, path, _ := curatorPair(t)
	ctx := ctxFor(t, 2*time.Minute)
	e := zc.NewElection(path)
	c := cur.newLock("selector", path)
	if a := cur.do("lead", c, "-1"); a != "ok" {
		t.Fatalf("Curator LeaderSelector alone = %s", a)
	}
	if ld, err := e.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Errorf("zklock's Leader while Curator's LeaderSelector leads = %+v, %v; want ErrNoLeader (Curator publishes no value)", ld, err)
	}
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	l, err := e.Campaign(short, "zklock")
	cancel()
	if err == nil {
		l.Release(ctx)
		t.Fatal("zklock's Campaign won while Curator's LeaderSelector led")
	}
	won := make(chan lockResult, 1)
	go func() {
		l, err := e.Campaign(ctx, "zklock")
		won <- lockResult{l, err}
	}()
	waitsFor(t, won, 300*time.Millisecond, "zklock's Campaign while Curator's LeaderSelector leads")
	cur.do("unlead", c)
	r := got(t, won, "zklock's Campaign after Curator's leader resigned")
	if r.err != nil {
		t.Fatal(r.err)
	}

	c2 := cur.newLock("selector", path)
	led := cur.send("lead", c2, "-1")
	waitsFor(t, led, 500*time.Millisecond, "Curator's LeaderSelector while zklock's Election leads")
	if err := e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if a := got(t, led, "Curator's LeaderSelector after zklock's leader resigned"); a != "ok" {
		t.Fatalf("Curator's LeaderSelector after zklock's leader resigned = %s", a)
	}
	cur.do("unlead", c2)
}

// A zklock Semaphore lease whose lease node of Curator's layout is deleted
// (by an operator, or a reaper) ends as lost within its confirmation
// period, as it does when its own node is deleted: the permit that node
// stood for is free for Curator's takers, so a lease that went on would
// hold beside them, more holders than permits.
func TestIntegrationCuratorSemaphoreLeaseNodeDeleted(t *testing.T) {
	zc, cur, path, adm := curatorPair(t)
	ctx := ctxFor(t, time.Minute)
	z := mustTake(t, ctx, zc.NewSemaphore(path, 1), "a free semaphore")
	defer z.Release(ctx)
	kids := children(t, adm, path+"/leases")
	if len(kids) != 1 {
		t.Fatalf("leases under %s/leases = %v; want zklock's one", path, kids)
	}
	if err := adm.Delete(path+"/leases/"+kids[0], -1); err != nil {
		t.Fatal(err)
	}
	c := cur.newLock("sem", path, "1")
	if a := cur.do("lease", c, "5000"); a != "ok" {
		t.Fatalf("Curator lease once zklock's lease node is gone = %s; want ok", a)
	}
	defer cur.do("unlease", c)
	// The lease's confirmation period is at most a third of the session
	// timeout; one session timeout is ample on a loaded machine.
	select {
	case <-z.Done():
		if err := z.Err(); !errors.Is(err, dlock.ErrLost) {
			t.Fatalf("zklock lease ended with %v; want ErrLost", err)
		}
	case <-time.After(testSessionTimeout):
		t.Fatalf("zklock lease still held %v after its Curator lease node was deleted, beside Curator's lease of a 1-lease semaphore (Err %v)", testSessionTimeout, z.Err())
	}
	// The lost lease's permit node goes too: zklock's queue is free.
	for deadline := time.Now().Add(testSessionTimeout); ; time.Sleep(50 * time.Millisecond) {
		var left []string
		for _, k := range children(t, adm, path) {
			if k != "locks" && k != "leases" {
				left = append(left, k)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("permit nodes of the lost lease still under %s after %v: %v", path, testSessionTimeout, left)
		}
	}
}

// A Semaphore.Lock waiting for a lease of Curator's layout (here held by a
// plain client, as Curator holds one) waits through a restart of the
// ensemble without its data, as a Lock waiting in zklock's own queue does:
// its permit node and Curator's are gone with the session, and it takes
// the semaphore once its Client has a new session. Before, it returned an
// error while its ctx had a minute left.
func TestIntegrationSemaphoreCuratorStepWaitsThroughRestartEmpty(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	servers := []string{z.Addr()}
	ctx := ctxFor(t, time.Minute)
	path := uniquePath(t)
	zc := connect(t, servers)
	adm := admin(t, servers)
	standInLease(t, adm, path)
	w := lockLater(ctx, zc.NewSemaphore(path, 1))
	// Waiting at Curator's step: it holds Curator's mutex.
	for deadline := time.Now().Add(10 * time.Second); len(children(t, adm, path+"/locks")) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the zklock Lock never took Curator's mutex")
		}
	}
	waitsFor(t, w, 200*time.Millisecond, "zklock Semaphore.Lock while the lease is taken")
	if err := z.RestartEmpty(); err != nil {
		t.Fatal(err)
	}
	r := got(t, w, "zklock Semaphore.Lock after the ensemble restarted empty")
	if r.err != nil {
		t.Fatalf("Semaphore.Lock waiting at Curator's step through a restart without data = %v; want the lease (ctx had %v left)", r.err, time.Until(deadlineOf(ctx)).Round(time.Second))
	}
	r.lease.Release(ctx)
}

func deadlineOf(ctx context.Context) time.Time { d, _ := ctx.Deadline(); return d }

// A zklock Semaphore.Lock waiting for a lease while holding Curator's
// mutex on path/locks gives the wait up (and queues again) when its mutex
// node is deleted: a Curator taker queued for the mutex then takes it and
// waits too, with its lease node beside zklock's, and once the holder
// leaves the two waiters, over the one permit together, would wait for
// each other until one gave up.
func TestIntegrationCuratorSemaphoreMutexNodeDeleted(t *testing.T) {
	zc, cur, path, adm := curatorPair(t)
	ctx := ctxFor(t, time.Minute)
	holder := standInLease(t, adm, path)
	w := lockLater(ctx, zc.NewSemaphore(path, 1))
	locks := func(n int, what string) []string {
		t.Helper()
		var gate []string
		for deadline := time.Now().Add(10 * time.Second); len(gate) < n; time.Sleep(20 * time.Millisecond) {
			if gate = children(t, adm, path+"/locks"); time.Now().After(deadline) {
				t.Fatalf("%s: Curator's mutex %s/locks has %v", what, path, gate)
			}
		}
		return gate
	}
	gate := locks(1, "the waiting zklock Lock never took Curator's mutex")[0]
	// The Curator taker queues for the mutex before zklock's node goes:
	// queued after it, as zklock queues again once it has seen its node
	// gone, it would wait for the mutex behind zklock, which would take
	// the lease first (two make tests side by side saw that when zklock
	// was the quicker). 20s: zklock notices its node gone at its next
	// confirmation, a third of a second on a quiet machine.
	c := cur.newLock("sem", path, "1")
	cw := cur.send("lease", c, "20000")
	locks(2, "the Curator lease never queued for Curator's mutex")
	if err := adm.Delete(path+"/locks/"+gate, -1); err != nil {
		t.Fatal(err)
	}
	waitsFor(t, cw, 300*time.Millisecond, "Curator lease while zklock's lease holds")
	if err := adm.Delete(holder, -1); err != nil {
		t.Fatal(err)
	}
	if a := got(t, cw, "Curator lease after the holder's release"); a != "ok" {
		t.Fatalf("Curator lease after the holder's release = %s, with zklock's waiter on a deleted mutex node; want ok", a)
	}
	waitsFor(t, w, 300*time.Millisecond, "zklock Lock while Curator's lease holds")
	cur.do("unlease", c)
	r := got(t, w, "zklock Lock after Curator's release")
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.lease.Release(ctx)
}

// standInLease takes through adm a lease of Curator's InterProcessSemaphoreV2
// layout on path, as Curator's Lease holds one, and returns its node.
func standInLease(t *testing.T, adm *zk.Conn, path string) string {
	t.Helper()
	makePath(t, adm, path+"/leases", zk.WorldACL(zk.PermAll))
	node, err := adm.Create(path+"/leases/_c_00000000-0000-0000-0000-000000000000-lease-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	return node
}

// A Semaphore TryLock on a healthy ensemble is refused with ErrNotObtained,
// at once, when Curator's mutex on path/locks is held (by a Curator taker
// in a long GC pause, say), as Curator's own acquire with no wait is
// refused: it neither waits for the mutex for TryLock's whole bound nor
// then reports the ensemble unavailable.
func TestIntegrationCuratorSemaphoreTryLockMutexHeld(t *testing.T) {
	servers := []string{sharedZK(t).Addr()}
	zc, path, adm := connect(t, servers), uniquePath(t), admin(t, servers)
	ctx := ctxFor(t, time.Minute)
	standInLease(t, adm, path) // one of two permits taken: TryLock's look passes
	if _, err := adm.Create(path+"/locks", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Create(path+"/locks/_c_00000000-0000-0000-0000-000000000000-lock-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	lease, err := zc.NewSemaphore(path, 2).TryLock(ctx)
	took := time.Since(start)
	if lease != nil {
		lease.Release(ctx)
	}
	if !errors.Is(err, dlock.ErrNotObtained) || errors.Is(err, dlock.ErrUnavailable) || took > time.Second {
		t.Fatalf("TryLock while Curator's mutex is held = %v after %v; want ErrNotObtained (not ErrUnavailable) at once", err, took.Round(time.Millisecond))
	}
}

// A Semaphore lease without renewal lasts its TTL, and one with a maximum
// hold its MaxHold, from its grant, which comes once Curator's lease is
// taken: a Lock that waited for Curator's lease most of that time does not
// get a lease with only the rest of it left (see dlocktest's
// GrantNotShort: a short lease is not right).
func TestIntegrationSemaphoreFixedLeaseAfterCuratorWait(t *testing.T) {
	servers := []string{sharedZK(t).Addr()}
	zc, adm := connect(t, servers), admin(t, servers)
	const d = 3 * time.Second
	for _, tc := range []struct {
		name string
		opts []zklock.Option
	}{
		{"WithoutRenewal", []zklock.Option{zklock.WithTTL(d), zklock.WithoutRenewal()}},
		{"WithMaxHold", []zklock.Option{zklock.WithTTL(d), zklock.WithMaxHold(d)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			path := uniquePath(t)
			holder := standInLease(t, adm, path)
			w := lockLater(ctx, zc.NewSemaphore(path, 1, tc.opts...))
			for deadline := time.Now().Add(10 * time.Second); len(children(t, adm, path+"/locks")) == 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the zklock Lock never took Curator's mutex")
				}
			}
			time.Sleep(d * 8 / 10)
			if err := adm.Delete(holder, -1); err != nil {
				t.Fatal(err)
			}
			r := got(t, w, "zklock Lock after the Curator lease's release")
			if r.err != nil {
				t.Fatal(r.err)
			}
			defer r.lease.Release(ctx)
			granted := time.Now()
			select {
			case <-r.lease.Done():
				t.Fatalf("lease of %v ended %v after Lock returned it (%v)", d, time.Since(granted).Round(time.Millisecond), r.lease.Err())
			case <-time.After(d / 2):
			}
		})
	}
}
