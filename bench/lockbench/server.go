package lockbench

import (
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/internal/servers"
)

// server is the benchmark's own redis-server: 127.0.0.1, a free port, no
// persistence (internal/servers' defaults).
type server struct {
	r       *servers.Redis
	version string
}

func startServer() (*server, error) {
	r, err := servers.LaunchRedis(servers.RedisConfig{})
	if err != nil {
		return nil, err
	}
	s := &server{r: r}
	info, err := r.Do("INFO", "server")
	if err != nil {
		r.Close()
		return nil, err
	}
	s.version = infoFields(info)["redis_version"]
	return s, nil
}

func (s *server) addr() string { return s.r.Addr() }
func (s *server) close() error { return s.r.Close() }

// flush empties the data set between runs (scripts stay loaded).
func (s *server) flush() error {
	_, err := s.r.Do("FLUSHALL")
	return err
}

// stats is one INFO snapshot of command counters.
type stats struct {
	total int64            // total_commands_processed
	calls map[string]int64 // commandstats calls by command name
}

// snapshot takes both counters with one INFO command, which itself adds
// one to total_commands_processed after the reply (see sub).
func (s *server) snapshot() (stats, error) {
	info, err := s.r.Do("INFO", "stats", "commandstats")
	if err != nil {
		return stats{}, err
	}
	f := infoFields(info)
	st := stats{calls: map[string]int64{}}
	st.total, _ = strconv.ParseInt(f["total_commands_processed"], 10, 64)
	for k, v := range f {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		st.calls[name], _ = strconv.ParseInt(calls, 10, 64)
	}
	return st, nil
}

// sub returns the commands run between two snapshots: all of them
// (total_commands_processed, which counts commands run inside Lua too), and
// those a client sent itself: commandstats calls minus the commands in
// luaInternal and the benchmark's own INFO.
func (after stats) sub(before stats, luaInternal []string) (all, clientSent int64) {
	all = after.total - before.total - 1 // the first snapshot's own INFO
	internal := map[string]bool{"info": true}
	for _, c := range luaInternal {
		internal[c] = true
	}
	for name, n := range after.calls {
		if !internal[name] {
			clientSent += n - before.calls[name]
		}
	}
	return all, clientSent
}

// addPer adds to m the commands run since before, all of them and those a
// client sent (see sub), divided by n.
func (after stats) addPer(before stats, luaInternal []string, n float64, m Metrics) {
	all, sent := after.sub(before, luaInternal)
	m["redis_cmds_client"] = ratio(float64(sent), n)
	m["redis_cmds_all"] = ratio(float64(all), n)
}

// serverUse is one reading of the server's command counters and CPU time.
type serverUse struct {
	st  stats
	cpu time.Duration
}

func (s *server) use() (serverUse, error) {
	st, err := s.snapshot()
	return serverUse{st, s.cpu()}, err
}

// addUse adds to m the server's use since before, per n cycles: commands
// (see addPer) and CPU time ("srv_cpu", see pidCPU).
func (s *server) addUse(before serverUse, luaInternal []string, n float64, m Metrics) error {
	cpu := s.cpu()
	after, err := s.snapshot()
	if err != nil {
		return err
	}
	after.addPer(before.st, luaInternal, n, m)
	m["srv_cpu"] = ratio(float64(cpu-before.cpu), n)
	return nil
}

// cpu returns the server process's user+system CPU time.
func (s *server) cpu() time.Duration { return pidCPU(s.r.PID()) }

// pidCPU returns a process's CPU time: the time its threads ran, in
// nanoseconds, from /proc/<pid>/task/*/schedstat; where the kernel keeps no
// schedstat, user+system time from /proc/<pid>/stat, in 10ms ticks (too
// coarse for a few thousand cycles of a few µs each).
func pidCPU(pid int) time.Duration {
	if d, ok := schedCPU(pid); ok {
		return d
	}
	return statCPU(pid)
}

// schedCPU sums the run time of a process's threads from schedstat.
func schedCPU(pid int) (time.Duration, bool) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return 0, false
	}
	var sum int64
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // the thread ended meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			return 0, false
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		sum += ns
	}
	return time.Duration(sum), true
}

// statCPU returns a process's user+system CPU time from /proc/<pid>/stat.
func statCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ is 100 on Linux
}

// systemCPU returns the CPU time the whole machine spent not idle (the
// "cpu" line of /proc/stat: user, nice, system, irq, softirq, steal).
func systemCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ
}

func infoFields(info string) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// moduleVersion returns the version of a dependency of this binary.
func moduleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown version)"
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			return d.Version
		}
	}
	return "(unknown version)"
}

// libraryState names the library commit the benchmark was built from, and
// whether files outside bench/ had uncommitted changes.
func libraryState() string {
	head, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown (not a git checkout)"
	}
	s := "commit " + strings.TrimSpace(string(head))
	out, err := exec.Command("git", "status", "--porcelain", "--", ":/", ":(top,exclude)bench").Output()
	if dirty := strings.Fields(string(out)); err == nil && len(dirty) > 0 {
		var paths []string
		for line := range strings.Lines(string(out)) {
			if len(line) > 3 {
				paths = append(paths, strings.TrimSpace(line[3:]))
			}
		}
		if len(paths) > 4 {
			paths = append(paths[:4], "…")
		}
		s += " with uncommitted changes outside bench/: " + strings.Join(paths, ", ")
	}
	return s
}
