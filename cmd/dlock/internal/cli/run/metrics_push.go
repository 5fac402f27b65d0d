package run

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/dlockprom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
	"github.com/prometheus/common/expfmt"
)

// PushTimeout bounds one push to the Pushgateway of --metrics-push.
const PushTimeout = 5 * time.Second

// A shortJob keeps the metrics of a dlock run that may end before any
// scrape: it pushes them to a Pushgateway (--metrics-push) and writes them
// to a file for node_exporter's textfile collector (--metrics-textfile)
// when the lock is granted, when it is lost, and when dlock exits.
type shortJob struct {
	collector *dlockprom.Collector
	reg       *prometheus.Registry
	pusher    *push.Pusher // nil without --metrics-push
	pushURL   string       // for messages, without user information
	textfile  string       // "" without --metrics-textfile
	say       func(format string, args ...any)

	kick chan struct{} // a flush is due
	stop chan struct{} // closed by finish
	done chan struct{} // closed when the flusher has stopped
	mu   sync.Mutex    // one flush at a time
	// failed records the destinations whose last flush failed, so that a
	// failure is reported once, not at every flush.
	failed map[string]bool
}

// newShortJob checks --metrics-push and --metrics-textfile and returns
// the shortJob that serves them, nil if neither is given. Its error is a
// UsageError naming the flag, found before the lock is taken.
func newShortJob(o Options, say func(string, ...any)) (*shortJob, error) {
	if o.MetricsPush == "" && o.MetricsTextfile == "" {
		return nil, nil
	}
	collector := dlockprom.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector)
	j := &shortJob{collector: collector, reg: reg, say: say, failed: map[string]bool{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if o.MetricsPush != "" {
		p, shown, err := pusherFor(o.MetricsPush, o.Name)
		if err != nil {
			return nil, err
		}
		j.pusher, j.pushURL = p.Gatherer(reg), shown
	}
	if o.MetricsTextfile != "" {
		if err := checkTextfile(o.MetricsTextfile); err != nil {
			return nil, err
		}
		j.textfile = o.MetricsTextfile
	}
	go j.flusher()
	return j, nil
}

// pusherFor returns the Pusher of --metrics-push raw for the lock name:
// raw is the Pushgateway's URL, such as http://pushgateway:9091, and the
// job is the lock's name; or the URL of a group in the Pushgateway's own
// form, http://pushgateway:9091/metrics/job/JOB{/LABEL/VALUE}, used as it
// is (a LABEL@base64 takes a VALUE in base64url, as the Pushgateway does).
// The labels of the metrics themselves (lock, kind, result, cause) cannot
// group. shown is raw without its user information, which goes as basic
// authentication.
func pusherFor(raw, name string) (p *push.Pusher, shown string, err error) {
	cmdutil.NoteSecrets(raw)
	u, err := url.Parse(raw)
	bad := func(why string) error {
		shown := raw
		if strings.Contains(raw, "@") { // user information: a password, maybe
			shown = cmdutil.Redact(raw)
		}
		return cmdutil.Usagef("dlock run: --metrics-push %s: %s; want the Pushgateway's URL, such as http://127.0.0.1:9091, or a group's, such as http://127.0.0.1:9091/metrics/job/nightly/host/web1",
			shown, why)
	}
	if err != nil {
		return nil, "", bad("not a URL (want http://HOST:PORT)")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, "", bad("the scheme must be http or https")
	}
	if u.Host == "" {
		return nil, "", bad("no host")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, "", bad("a query or fragment has no place in it")
	}
	base, group, hasGroup := strings.Cut(strings.TrimSuffix(u.EscapedPath(), "/"), "/metrics/job/")
	if !hasGroup && base != "" {
		return nil, "", bad("a path other than /metrics/job/JOB[/LABEL/VALUE...]")
	}
	job, grouping := name, [][2]string(nil)
	if hasGroup {
		parts := strings.Split(group, "/")
		if len(parts)%2 != 1 || slices.Contains(parts, "") {
			return nil, "", bad("the path after /metrics/job/ must be JOB, then LABEL/VALUE pairs")
		}
		grouping = nil
		for i, s := range parts {
			if parts[i], err = url.PathUnescape(s); err != nil {
				return nil, "", bad(err.Error())
			}
		}
		job = parts[0]
		for i := 1; i < len(parts); i += 2 {
			label, b64 := strings.CutSuffix(parts[i], "@base64")
			value := parts[i+1]
			if b64 {
				v, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(value, "="))
				if err != nil {
					return nil, "", bad("the value of " + label + "@base64 is not base64url")
				}
				value = string(v)
			}
			if !validLabel(label) || slices.Contains([]string{"job", "lock", "kind", "result", "cause"}, label) {
				return nil, "", bad(fmt.Sprintf("%q is not a grouping label name", label))
			}
			grouping = append(grouping, [2]string{label, value})
		}
	}
	endpoint := *u
	endpoint.Path, endpoint.RawPath, endpoint.User = base, "", nil
	// The password goes in a header, not in the URL the client's errors
	// show.
	p = push.New(endpoint.String(), job).Client(&http.Client{Timeout: PushTimeout})
	if u.User != nil {
		pass, _ := u.User.Password()
		p = p.BasicAuth(u.User.Username(), pass)
	}
	for _, g := range grouping {
		p = p.Grouping(g[0], g[1])
	}
	return p, endpoint.String(), nil
}

// validLabel reports whether s is a Prometheus label name.
func validLabel(s string) bool {
	if s == "" || strings.HasPrefix(s, "__") {
		return false
	}
	for i, c := range s {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// checkTextfile checks that dlock can write the file path of
// --metrics-textfile as node_exporter's textfile collector reads it: a
// name ending in .prom (the collector reads no other) in a directory dlock
// may create files in.
func checkTextfile(path string) error {
	bad := func(format string, args ...any) error {
		return cmdutil.Usagef("dlock run: --metrics-textfile %s: %s", cmdutil.Quote(path), fmt.Sprintf(format, args...))
	}
	base := filepath.Base(path)
	switch {
	case strings.HasSuffix(path, "/") || base == "." || base == "..":
		return bad("want a file's path, such as /var/lib/node_exporter/textfile/dlock.prom")
	case !strings.HasSuffix(base, ".prom") || base == ".prom":
		return bad("the name must end in .prom: node_exporter's textfile collector reads only *.prom files")
	}
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return bad("it exists and is not a regular file")
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return bad("its directory %s does not exist", dir)
	case err != nil:
		return bad("%v", err)
	case !fi.IsDir():
		return bad("%s is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, tempPattern(base))
	if err != nil {
		return bad("cannot create files in %s: %v", dir, errors.Unwrap(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// tempPattern is the pattern of the temporary files written before the
// rename: hidden, and not ending in .prom, so that the collector never
// reads one.
func tempPattern(base string) string { return "." + base + ".*.tmp" }

// Observe passes e to the metrics and asks for a flush when the lease is
// granted or lost.
func (j *shortJob) Observe(e dlock.Event) {
	j.collector.Observe(e)
	if e.Kind == dlock.EventAcquired || e.Kind == dlock.EventLost {
		select {
		case j.kick <- struct{}{}:
		default: // one is due already
		}
	}
}

// flusher flushes whenever Observe asks, until finish.
func (j *shortJob) flusher() {
	defer close(j.done)
	for {
		select {
		case <-j.kick:
			j.flush()
		case <-j.stop:
			return
		}
	}
}

// finish stops the flusher and flushes the final values: run defers it,
// so it comes after the release.
func (j *shortJob) finish() {
	close(j.stop)
	<-j.done
	j.flush()
}

// flush pushes and writes the metrics as they are now, reporting a failure
// once until the destination works again.
func (j *shortJob) flush() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.pusher != nil {
		ctx, cancel := context.WithTimeout(context.Background(), PushTimeout)
		err := j.pusher.PushContext(ctx)
		cancel()
		j.report("--metrics-push "+j.pushURL, err)
	}
	if j.textfile != "" {
		j.report("--metrics-textfile "+cmdutil.Quote(j.textfile), writeTextfile(j.textfile, j.reg))
	}
}

func (j *shortJob) report(what string, err error) {
	if err != nil && !j.failed[what] {
		j.say("cannot update the metrics of %s: %v", what, err)
	}
	j.failed[what] = err != nil
}

// writeTextfile writes g's metrics to path atomically: to a temporary file
// in path's directory, synced, then renamed over path, so that a reader
// sees the old file or the new one, never part of one.
func writeTextfile(path string, g prometheus.Gatherer) (err error) {
	mfs, err := g.Gather()
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), tempPattern(filepath.Base(path)))
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	for _, mf := range mfs {
		if _, err = expfmt.MetricFamilyToText(f, mf); err != nil {
			return err
		}
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil { // the rename, on disk
		d.Sync()
		d.Close()
	}
	return nil
}
