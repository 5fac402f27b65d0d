package servers

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	startTimeout = 60 * time.Second
	stopTimeout  = 5 * time.Second
	doTimeout    = 10 * time.Second
	logTailLines = 20
	logFileName  = "redis.log"
	outFileName  = "redis.out" // stdout and stderr, for errors printed before the log file is open
)

// errAddrInUse marks a start that failed because the port was taken.
var errAddrInUse = errors.New("address already in use")

// RedisConfig describes a redis-server to start. The zero value is a
// server without persistence on a free port in a new temporary directory.
type RedisConfig struct {
	// Persistence enables the append-only file with an fsync after every
	// write, so data survives a SIGKILL followed by Restart. Without it
	// the server runs with --save "" --appendonly no and comes back empty
	// after a restart.
	Persistence bool

	// Args holds extra redis-server arguments, such as
	// "--requirepass", "secret". They come last and so override the
	// defaults. When Args sets --requirepass, Do authenticates with it.
	Args []string

	// Dir is the server's working directory. If empty, a new temporary
	// directory is created and Close removes it.
	Dir string

	// Port is the TCP port to listen on. Zero means a free port.
	Port int

	// Log, if not nil, receives the last lines of the server's log, one
	// line per call, when the server fails to start and when it is
	// closed.
	Log func(string)

	// sentinel, if set, is the text of a sentinel.conf: the server runs as
	// a Sentinel with that file (see LaunchSentinel).
	sentinel string
}

// A Redis is a redis-server process listening on 127.0.0.1. Its methods
// are safe for concurrent use. The address, port and directory stay the
// same across Kill, Stop and Restart. Stop sends SIGTERM; Close hands the
// tail of the log to RedisConfig.Log.
type Redis struct {
	daemon
	cfg      RedisConfig
	bin      string
	busPort  int // cluster bus port; 0 unless the server is a cluster node
	password string
}

// LaunchRedis starts a redis-server described by cfg and waits until it
// answers PING. If the server does not come up within about ten seconds,
// LaunchRedis stops it and returns an error that includes the tail of its
// log. The caller must Close the returned Redis.
func LaunchRedis(cfg RedisConfig) (*Redis, error) {
	return launch(cfg, false)
}

// launch starts a server; when clusterNode is set it also gives the server
// a free cluster bus port.
func launch(cfg RedisConfig, clusterNode bool) (*Redis, error) {
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("servers: invalid port %d", cfg.Port)
	}
	bin, err := LookBinary("redis-server")
	if err != nil {
		return nil, err
	}
	r := &Redis{
		daemon: daemon{
			what: "redis-server",
			logs: []string{outFileName, logFileName},
			log:  cfg.Log,
		},
		cfg:      cfg,
		bin:      bin,
		password: findPassword(cfg.Args),
	}
	r.srv = r
	r.cfg.Args = slices.Clone(cfg.Args)
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "testenv-redis-")
		if err != nil {
			return nil, fmt.Errorf("servers: %w", err)
		}
		r.dir, r.ownDir = dir, true
	} else {
		dir, err := filepath.Abs(cfg.Dir)
		if err == nil {
			err = os.MkdirAll(dir, 0o755)
		}
		if err != nil {
			return nil, fmt.Errorf("servers: redis directory: %w", err)
		}
		r.dir = dir
	}

	var startErr error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 && cfg.Port != 0 {
			time.Sleep(300 * time.Millisecond)
		}
		if cfg.Port == 0 {
			if r.port, err = FreePort(); err != nil {
				startErr = err
				break
			}
		} else {
			r.port = cfg.Port
			reservePort(cfg.Port)
		}
		if clusterNode {
			if r.busPort, err = FreePort(); err != nil {
				startErr = err
				break
			}
		}
		r.mu.Lock()
		startErr = r.startLocked()
		r.mu.Unlock()
		if startErr == nil {
			running.add(&r.daemon)
			return r, nil
		}
		if !errors.Is(startErr, errAddrInUse) {
			break
		}
	}
	r.Close()
	return nil, startErr
}

// findPassword returns the value of the last --requirepass in args.
func findPassword(args []string) string {
	pass := ""
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--requirepass" {
			pass = args[i+1]
		}
	}
	return pass
}

// args returns the redis-server command line.
func (r *Redis) args() []string {
	var a []string
	if r.cfg.sentinel != "" { // a Sentinel's config file comes first
		a = append(a, filepath.Join(r.dir, sentinelConfName), "--sentinel")
	}
	a = append(a,
		"--port", strconv.Itoa(r.port),
		"--bind", "127.0.0.1",
		"--dir", r.dir,
		"--daemonize", "no",
		"--protected-mode", "no",
		"--logfile", filepath.Join(r.dir, logFileName),
		"--save", "",
	)
	if r.cfg.Persistence {
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		a = append(a, "--appendonly", "no")
	}
	if r.busPort != 0 {
		a = append(a, "--cluster-port", strconv.Itoa(r.busPort))
	}
	return append(a, r.cfg.Args...)
}

// startLocked starts a new process and waits until it is ready. On
// failure the process is gone when startLocked returns. r.mu must be held.
func (r *Redis) startLocked() error {
	if r.cfg.sentinel != "" {
		// Sentinel rewrites its file, so each start begins from the original.
		if err := os.WriteFile(filepath.Join(r.dir, sentinelConfName), []byte(r.cfg.sentinel), 0o644); err != nil {
			return fmt.Errorf("servers: %w", err)
		}
	}
	return r.runLocked(exec.Command(r.bin, r.args()...), startTimeout, "answer PING", func(pid int) error {
		if !r.answers(pid) {
			return errNotYet
		}
		return nil
	})
}

// restartLocked starts the stopped server again, retrying while the port
// is still taken. r.mu must be held.
func (r *Redis) restartLocked() error { return startRetrying(r.startLocked) }

// answers reports whether the server on r's port is ready and is the
// process pid.
func (r *Redis) answers(pid int) bool {
	v, err := roundTrip(r.Addr(), r.password, 500*time.Millisecond, []string{"PING"})
	if err != nil {
		return false
	}
	if e, ok := v.(redisError); ok && strings.HasPrefix(string(e), "LOADING") {
		return false
	}
	v, err = roundTrip(r.Addr(), r.password, 500*time.Millisecond, []string{"INFO", "server"})
	if err != nil {
		return false
	}
	info, ok := v.(string)
	if !ok {
		return true // INFO refused (renamed or by ACL); PING was answered
	}
	return infoField(info, "process_id") == strconv.Itoa(pid)
}

// infoField returns the value of key in INFO or CLUSTER INFO output.
func infoField(info, key string) string {
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == key {
			return v
		}
	}
	return ""
}

// Do sends one command to the server on a new connection and returns the
// reply: simple and bulk strings as they are, integers in decimal, arrays
// with their elements joined by newlines and nil as "". An error reply is
// returned as an error whose text is the server's, such as
// "MOVED 866 127.0.0.1:7001". Do gives up after two seconds. It
// authenticates first when RedisConfig.Args sets --requirepass.
func (r *Redis) Do(args ...string) (string, error) {
	return r.do(doTimeout, args...)
}

func (r *Redis) do(timeout time.Duration, args ...string) (string, error) {
	v, err := roundTrip(r.Addr(), r.password, timeout, args)
	if err != nil {
		return "", err
	}
	if e, ok := v.(redisError); ok {
		return "", e
	}
	return flatten(v), nil
}
