package backend

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/internal/zkpath"
	"github.com/dlock-go/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// Environment variables of ZooKeeper, read when the matching flag is not
// given.
const (
	EnvZK         = "DLOCK_ZK"           // host:port[,host:port...]
	EnvZKAuthFile = "DLOCK_ZK_AUTH_FILE" // a file whose first line is user:password
	EnvZKAuth     = "DLOCK_ZK_AUTH"      // user:password itself
)

// ZooKeeper: --zk, zklock. A lock name is a path under ZKRoot, or an
// absolute path.
var _ = register(&driver{
	name: "zookeeper", title: "ZooKeeper", order: 3,
	flag: "zk", example: "--zk host:port",
	env: []string{EnvZK, EnvZKAuthFile, EnvZKAuth}, passwordEnv: []string{EnvZKAuth},
	flags: func(fs *flag.FlagSet, f *Flags) {
		fs.StringVar(&f.ZK, "zk", "", "ZooKeeper connect string, host:port[,host:port...][/chroot]: with a chroot, every lock's path is below it (env "+EnvZK+")")
		fs.StringVar(&f.ZKAuthFile, "zk-auth-file", "", "ZooKeeper: authenticate with the digest scheme as the user:password on this file's first line, and make the lock's nodes that user's alone (env "+EnvZKAuthFile+", or "+EnvZKAuth+" holding user:password itself)")
	},
	given:   func(f *Flags) bool { return f.ZK != "" },
	fromEnv: func(f *Flags, getenv func(string) string) { f.ZK = getenv(EnvZK) },
	checkFlags: func(f *Flags, _ func(string) string, named bool) error {
		switch {
		case f.ZKAuthFile != "" && !named:
			return cmdutil.Usagef("--zk-auth-file goes with --zk")
		case f.PasswordFile != "" && named:
			return cmdutil.Usagef("--password-file does not go with --zk; give ZooKeeper's user:password in --zk-auth-file")
		}
		return nil
	},
	resolve: func(f *Flags, getenv func(string) string, _ string, spec *Spec) error {
		servers, chroot, err := parseZK(f.ZK)
		if err != nil {
			return err
		}
		spec.ZK, spec.ZKChroot = servers, chroot
		if file := cmp.Or(f.ZKAuthFile, getenv(EnvZKAuthFile)); file != "" {
			if spec.ZKUser, spec.ZKPassword, err = readZKAuth(file); err != nil {
				return err
			}
		} else if v := getenv(EnvZKAuth); v != "" {
			var ok bool
			spec.ZKUser, spec.ZKPassword, ok = strings.Cut(v, ":")
			cmdutil.NoteSecret(spec.ZKPassword)
			if !ok || spec.ZKUser == "" || spec.ZKPassword == "" {
				return cmdutil.Usagef("%s is not user:password", EnvZKAuth)
			}
		}
		if f.TLS.given() { // any TLS flag: the servers are secure client ports
			if spec.ZKTLS, err = f.TLS.config(nil); err != nil {
				return err
			}
		}
		return nil
	},
	claims:    func(s Spec) bool { return len(s.ZK) > 0 },
	describe:  func(s Spec) string { return strings.Join(s.ZK, ",") + s.ZKChroot },
	checkName: checkZKName,
	nodes: func(s Spec) []Node {
		var out []Node
		for _, srv := range s.ZK {
			out = append(out, Node{Addr: srv, Spec: Spec{ZK: []string{srv}, ZKChroot: s.ZKChroot, ZKTLS: s.ZKTLS, ZKUser: s.ZKUser, ZKPassword: s.ZKPassword}})
		}
		return out
	},
	connect: connectZooKeeper,
	denied:  zkDenied,
	oncePer: true,
})

// zkDenied turns a refusal that no retry heals into a UsageError: a
// session without the credentials the lock's nodes ask for, a lock path
// whose ACL lets others in (zklock.ErrPathACL).
func zkDenied(err error) error {
	switch {
	case errors.Is(err, zk.ErrNoAuth):
		return cmdutil.Usagef("%s: give the credentials of the lock's user in --zk-auth-file", cmdutil.Reason(err))
	case errors.Is(err, zklock.ErrPathACL):
		return cmdutil.Usagef("%s", cmdutil.Reason(err))
	}
	return err
}

// zkConn is a ZooKeeper session.
type zkConn struct {
	c      *zklock.Client
	warn   []string
	chroot string // the connect string's chroot, "/app"; "" for none
	authed bool   // the session has digest credentials
}

func connectZooKeeper(ctx context.Context, spec Spec, obs dlock.Observer) (conn, error) {
	if err := dialAny(ctx, "ZooKeeper", spec.ZK); err != nil {
		return nil, err
	}
	opts := []zklock.ClientOption{zklock.WithObserver(obs), zklock.WithLogger(spec.log())}
	if spec.LongestTTL > 0 {
		// --ttl is how long the lock outlives a dlock that died (kill
		// -9, a lost machine), as on every backend: on ZooKeeper, the
		// session timeout, plus up to a tick of the ensemble, which
		// looks for expired sessions once a tick. The ensemble grants a
		// timeout between its minSessionTimeout and maxSessionTimeout
		// (2 and 20 ticks by default: 4s and 40s at the default
		// tickTime of 2s). A lease lasts a third of it (LeaseTime).
		opts = append(opts, zklock.WithSessionTimeout(spec.LongestTTL))
	}
	if spec.ZKTLS != nil {
		opts = append(opts, zklock.WithTLS(spec.ZKTLS))
	}
	if spec.ZKUser != "" {
		opts = append(opts, zklock.WithDigestAuth(spec.ZKUser, spec.ZKPassword))
	}
	s, err := connectZK(ctx, spec.ZK, opts...)
	if err != nil {
		return nil, err
	}
	z := &zkConn{c: s, chroot: spec.ZKChroot, authed: spec.ZKUser != ""}
	if g := s.GrantedTimeout(); spec.LongestTTL > 0 && g > spec.LongestTTL {
		// Below minSessionTimeout: the ensemble keeps a dead
		// dlock's session, and its lock, for longer than --ttl.
		z.warn = append(z.warn, fmt.Sprintf("WARNING: --ttl %v is below the ZooKeeper ensemble's minSessionTimeout: it granted a session timeout of %v, so a dlock that dies holds the lock for up to %v; use --ttl %v or more, or lower the ensemble's minSessionTimeout",
			spec.LongestTTL, g, g, g))
	}
	return z, nil
}

// path is the ZooKeeper path of the lock called name, below the chroot.
func (z *zkConn) path(name string) string { return z.chroot + ZKPath(name) }

func (z *zkConn) locker(name string, o LockOptions) (dlock.Locker, error) {
	p, opts := z.path(name), []zklock.Option{zklock.WithTTL(o.TTL), zklock.WithMaxHold(o.MaxHold)}
	switch o.Kind {
	case KindMutex, KindFair: // a ZooKeeper mutex is a FIFO queue: always fair
		return z.c.NewMutex(p, opts...), nil
	case KindRead:
		return z.c.NewRWMutex(p, opts...).Reader(), nil
	case KindWrite:
		return z.c.NewRWMutex(p, opts...).Writer(), nil
	case KindSemaphore:
		return z.c.NewSemaphore(p, o.Permits, opts...), nil
	}
	return nil, unknownKind(o.Kind)
}

func (z *zkConn) election(name string, ttl time.Duration) (dlock.Election, error) {
	return z.c.NewElection(z.path(name), zklock.WithTTL(ttl)), nil
}

func (z *zkConn) admin(name string) (dlock.Admin, string, string) {
	return z.c, z.path(name), z.path(name)
}

// leaseTime: a lease lasts at most a third of the session timeout (see
// zklock.WithTTL).
func (z *zkConn) leaseTime(ttl time.Duration) time.Duration { return min(ttl, z.c.Timeout()/3) }

func (z *zkConn) warnings() []string { return z.warn }

func (z *zkConn) close() { z.c.Close() }

// ZKRoot is where a lock name that is not an absolute path lives in
// ZooKeeper: the name "nightly" is the path /dlock/nightly.
const ZKRoot = "/dlock"

// connectZK is zklock.New, returning by ctx's deadline (or AnswerTimeout)
// even if zklock.New does not: with a server that accepts connections but
// never answers, it returns only when the server closes them. A session
// made after that is closed.
//
// zklock.New, ended by its context, reports why (a TLS error, a refused
// connection) once go-zookeeper's connection loop has stopped: at once on
// a quiet machine, but a loaded one took more than 200ms (a wrong CA was
// then reported as a bare deadline). That wait comes out of the time
// given, not on top of it: zklock.New gets all but a quarter of it, or a
// second at most, so that --wait 1s on a silent server fails in about 1s.
func connectZK(ctx context.Context, servers []string, opts ...zklock.ClientOption) (*zklock.Client, error) {
	type result struct {
		s   *zklock.Client
		err error
	}
	ctx, cancel := context.WithTimeout(ctx, AnswerTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	nctx, ncancel := context.WithDeadline(ctx, deadline.Add(-min(time.Until(deadline)/4, time.Second)))
	defer ncancel()
	done := make(chan result, 1)
	go func() {
		s, err := zklock.New(nctx, servers, opts...)
		done <- result{s, err}
	}()
	select {
	case r := <-done:
		return r.s, r.err
	case <-nctx.Done():
		select {
		case r := <-done:
			return r.s, r.err
		case <-ctx.Done():
		}
		go func() {
			if r := <-done; r.s != nil {
				r.s.Close()
			}
		}()
		return nil, fmt.Errorf("no session with ZooKeeper %s: %w", strings.Join(servers, ","), ctx.Err())
	}
}

// checkZKName checks what ZooKeeper and zklock refuse in the path of a
// lock name.
func checkZKName(name string) error {
	p := ZKPath(name)
	if name == "/" {
		return cmdutil.Usagef("the root / cannot be a lock; give a name such as nightly-report or a path such as /locks/nightly")
	}
	if reason := zkpath.Check(p); reason != "" {
		if p != name && strings.HasPrefix(reason, "is ") {
			reason = strings.Replace(reason, "is ", "would be a ZooKeeper path that is ", 1)
		}
		return cmdutil.Usagef("lock name %s %s", cmdutil.Quote(name), reason)
	}
	return nil
}

// ZKPath is the ZooKeeper path of the lock called name.
func ZKPath(name string) string {
	if strings.HasPrefix(name, "/") {
		return name
	}
	return ZKRoot + "/" + name
}

// parseZK checks a ZooKeeper connect string, a comma-separated list of
// servers with an optional chroot after the last, host:port,host:port/app,
// as ZooKeeper's own clients take it; every path the command uses is then
// below the chroot.
func parseZK(list string) (servers []string, chroot string, err error) {
	if i := strings.IndexByte(list, '/'); i >= 0 {
		list, chroot = list[:i], strings.TrimSuffix(list[i:], "/")
		if chroot != "" {
			if reason := zkpath.Check(chroot); reason != "" {
				return nil, "", cmdutil.Usagef("--zk chroot %q %s; want host:port[,host:port...][/path]", cmdutil.RedactInput(chroot), reason)
			}
		}
	}
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, "", cmdutil.Usagef("--zk %q has an empty server; want host:port[,host:port...][/chroot]", cmdutil.RedactInput(list))
		}
		host, port, err := net.SplitHostPort(s)
		if err != nil || host == "" || strings.Contains(host, "@") {
			return nil, "", cmdutil.Usagef("--zk server %q is not host:port (ZooKeeper's client port is usually 2181)%s", cmdutil.RedactInput(s), credentialsHint(s, "--zk-auth-file or "+EnvZKAuth))
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, "", cmdutil.Usagef("--zk server %q: port %q is not a number from 1 to 65535", cmdutil.RedactInput(s), cmdutil.RedactInput(port))
		}
		servers = append(servers, s)
	}
	return servers, chroot, nil
}

// readZKAuth returns the user and password in the first line of the file
// name, user:password, as ZooKeeper's addauth digest takes them, and
// notes the password for cmdutil.Redact.
func readZKAuth(name string) (user, password string, err error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return "", "", cmdutil.Usagef("--zk-auth-file: %v", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	user, password, ok := strings.Cut(strings.TrimSuffix(line, "\r"), ":")
	cmdutil.NoteSecret(password)
	if !ok || user == "" || password == "" {
		return "", "", cmdutil.Usagef("--zk-auth-file %s: the first line is not user:password", name)
	}
	return user, password, nil
}

// The record of a lock's last successful run ("dlock run --once-per") is
// the node ZKRunsRoot+PATH, PATH the lock's path, holding --once-per in
// milliseconds. Its mtime is when the run finished, on the ensemble's
// clock; a write to ZKRunsRoot reads that clock now.

// ZKRunsRoot is the node below which ZooKeeper keeps --once-per's records
// (below the chroot, if any).
const ZKRunsRoot = "/dlock-runs"

func (z *zkConn) lastRun(ctx context.Context, name string) (time.Duration, bool, error) {
	conn := z.c.Conn()
	data, st, err := conn.Get(z.chroot + ZKRunsRoot + ZKPath(name))
	if errors.Is(err, zk.ErrNoNode) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the record of the last run: %w", err)
	}
	keep, err := strconv.ParseInt(string(data), 10, 64)
	if err != nil {
		return 0, false, nil // not dlock's: ignored, and overwritten by the next success
	}
	now, err := conn.Set(z.chroot+ZKRunsRoot, nil, -1)
	if err != nil {
		return 0, false, fmt.Errorf("reading the ensemble's clock at %s: %w", z.chroot+ZKRunsRoot, err)
	}
	ago := time.Duration(now.Mtime-st.Mtime) * time.Millisecond
	if ago >= time.Duration(keep)*time.Millisecond {
		return 0, false, nil
	}
	return ago, true, nil
}

func (z *zkConn) recordRun(ctx context.Context, name string, keep time.Duration) error {
	conn, p := z.c.Conn(), z.chroot+ZKRunsRoot+ZKPath(name)
	data := []byte(strconv.FormatInt(keep.Milliseconds(), 10))
	acl := zk.WorldACL(zk.PermAll)
	if z.authed {
		acl = zk.AuthACL(zk.PermAll)
	}
	_, err := conn.Set(p, data, -1)
	if errors.Is(err, zk.ErrNoNode) {
		// Make the parents, then the record; another run may make
		// either at the same time.
		for i := 1; i < len(p); i++ {
			if p[i] == '/' {
				if _, err := conn.Create(p[:i], nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
					return fmt.Errorf("recording the run: %w", err)
				}
			}
		}
		if _, err = conn.Create(p, data, 0, acl); errors.Is(err, zk.ErrNodeExists) {
			_, err = conn.Set(p, data, -1)
		}
	}
	if err != nil {
		return fmt.Errorf("recording the run at %s: %w", p, err)
	}
	return nil
}

func (z *zkConn) clearRun(ctx context.Context, name string) (bool, error) {
	p := z.chroot + ZKRunsRoot + ZKPath(name)
	err := z.c.Conn().Delete(p, -1)
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("removing the record of the last run at %s: %w", p, err)
	}
	return true, nil
}
