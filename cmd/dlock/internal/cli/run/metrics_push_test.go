package run

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// A reader of --metrics-textfile sees the old file or the new one, whole,
// never a part of one, while writeTextfile rewrites it; no temporary
// file is left behind, and the file is readable by node_exporter (0644).
func TestWriteTextfileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "dlock.prom")
	// Two registries whose expositions differ and are large enough (some
	// 100KB) that a plain write is seen half done.
	regs := make([]prometheus.Gatherer, 2)
	want := make([]string, 2)
	for i := range regs {
		reg := prometheus.NewRegistry()
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dlock_holders", Help: "h"}, []string{"lock", "kind"})
		for n := range 2000 {
			g.WithLabelValues(fmt.Sprintf("lock-%d", n), "mutex").Set(float64(i))
		}
		reg.MustRegister(g)
		var b bytes.Buffer
		mfs, _ := reg.Gather()
		regs[i] = prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return mfs, nil })
		for _, mf := range mfs {
			expfmt.MetricFamilyToText(&b, mf)
		}
		want[i] = b.String()
	}
	if err := writeTextfile(path, regs[0]); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads, bad atomic.Int64
	var badSample atomic.Value
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				b, err := os.ReadFile(path)
				reads.Add(1)
				if err != nil || (string(b) != want[0] && string(b) != want[1]) {
					if bad.Add(1) == 1 {
						badSample.Store(fmt.Sprintf("err %v, %d bytes of %d", err, len(b), len(want[0])))
					}
				}
			}
		}()
	}
	for i := range 30 {
		if err := writeTextfile(path, regs[i%2]); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if bad.Load() > 0 {
		t.Errorf("%d of %d reads saw a partial or missing file (first: %v)", bad.Load(), reads.Load(), badSample.Load())
	}
	t.Logf("%d reads during 30 writes, %d bad", reads.Load(), bad.Load())
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("files in the directory: %v; want only dlock.prom", names)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode of %s: %v (%v), want 0644", path, fi.Mode(), err)
	}
}

// --metrics-textfile names a .prom file in a directory that exists;
// anything else is a usage error naming the flag and what is wrong.
func TestCheckTextfile(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "sub.prom"), 0o755)
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "ok.prom"), ""},
		{filepath.Join(dir, "missing", "x.prom"), "does not exist"},
		{filepath.Join(dir, "file", "x.prom"), "is not a directory"},
		{filepath.Join(dir, "x.txt"), "must end in .prom"},
		{filepath.Join(dir, ".prom"), "must end in .prom"},
		{filepath.Join(dir, "sub.prom"), "not a regular file"},
		{dir + "/", "want a file's path"},
	} {
		err := checkTextfile(tc.path)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("checkTextfile(%q): %v", tc.path, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--metrics-textfile")):
			t.Errorf("checkTextfile(%q) = %v, want an error naming --metrics-textfile saying %q", tc.path, err, tc.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("checkTextfile left files behind: %d entries", len(entries))
	}
}

// --metrics-push takes the Pushgateway's URL, or a group's in its own
// form; anything else is a usage error.
func TestPusherFor(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"http://127.0.0.1:9091", ""},
		{"http://127.0.0.1:9091/", ""},
		{"https://user:secret@pg.example:9091", ""},
		{"http://127.0.0.1:9091/metrics/job/nightly", ""},
		{"http://127.0.0.1:9091/metrics/job/nightly/host/web1/path@base64/L3Zhci9sb2c", ""},
		{"127.0.0.1:9091", "not a URL"},
		{"ftp://127.0.0.1:9091", "scheme"},
		{"http://", "no host"},
		{"http://127.0.0.1:9091/push", "path"},
		{"http://127.0.0.1:9091/metrics/job/nightly/host", "LABEL/VALUE"},
		{"http://127.0.0.1:9091/metrics/job/", "LABEL/VALUE"},
		{"http://127.0.0.1:9091/metrics/job/j/__name__/x", "grouping label"},
		{"http://127.0.0.1:9091/metrics/job/j/job/x", "grouping label"},
		{"http://127.0.0.1:9091/metrics/job/j/p@base64/!!", "base64"},
		{"http://127.0.0.1:9091?x=1", "query"},
		{"http://127.0.0.1:9091/metrics/job/j/lock/x", "grouping label"},
		{"http://127.0.0.1:9091/metrics/job/j/kind/x", "grouping label"},
	} {
		_, shown, err := pusherFor(tc.raw, "lock")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("pusherFor(%q): %v", tc.raw, err)
		case tc.want == "" && strings.Contains(shown, "secret"):
			t.Errorf("pusherFor(%q) shows %q, with the password", tc.raw, shown)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--metrics-push")):
			t.Errorf("pusherFor(%q) = %v, want an error naming --metrics-push saying %q", tc.raw, err, tc.want)
		}
	}
}
