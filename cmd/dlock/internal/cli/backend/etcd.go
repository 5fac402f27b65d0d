package backend

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/etcdlock"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Environment variables of etcd, read when the matching flag is not given.
const (
	EnvEtcd         = "DLOCK_ETCD"          // host:port[,host:port...]; read when no backend flag is given
	EnvEtcdUser     = "DLOCK_ETCD_USER"     // the etcd user
	EnvEtcdPassword = "DLOCK_ETCD_PASSWORD" // its password
)

// On etcd the command's lock name is etcdlock's name, the key prefix
// without its trailing slash, as on Redis, PostgreSQL and MySQL: "dlock run
// --etcd … locks/nightly" and etcdlock's NewMutex("locks/nightly") are one
// lock, whose keys are locks/nightly/<lease>.

// parseEtcd checks a comma-separated list of etcd endpoints, host:port.
func parseEtcd(list string) ([]string, error) {
	var endpoints []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, cmdutil.Usagef("--etcd %q has an empty endpoint; want host:port[,host:port...]", cmdutil.RedactInput(list))
		}
		if strings.Contains(s, "://") {
			return nil, cmdutil.Usagef("--etcd endpoint %q: give host:port, without a scheme (the TLS flags turn TLS on)%s", cmdutil.RedactInput(s), credentialsHint(s, "--etcd-user and --password-file"))
		}
		host, port, err := net.SplitHostPort(s)
		if err != nil || host == "" {
			return nil, cmdutil.Usagef("--etcd endpoint %q is not host:port (etcd's client port is usually 2379)%s", cmdutil.RedactInput(s), credentialsHint(s, "--etcd-user and --password-file"))
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, cmdutil.Usagef("--etcd endpoint %q: port %q is not a number from 1 to 65535", cmdutil.RedactInput(s), cmdutil.RedactInput(port))
		}
		endpoints = append(endpoints, s)
	}
	return endpoints, nil
}

// checkEtcdName checks what makes a poor etcd key prefix.
func checkEtcdName(name string) error {
	q := cmdutil.Quote(name)
	switch {
	case name == "/":
		return cmdutil.Usagef("the root / cannot be a lock; give a name such as nightly-report or a prefix such as /locks/nightly")
	case strings.HasSuffix(name, "/"):
		return cmdutil.Usagef("lock name %s ends with a slash; etcdlock adds the slash itself", q)
	case len(name) > MaxEtcdName:
		return cmdutil.Usagef("lock name %s is too long: etcd lock names are at most %d bytes", q, MaxEtcdName)
	}
	return nil
}

// MaxEtcdName is the longest etcd lock name dlock accepts, in bytes: far
// below etcd's request limit (1.5 MiB by default), and enough for any key.
const MaxEtcdName = 4096

// etcd: --etcd, etcdlock. The lock's keys are NAME/<lease>.
var _ = register(&driver{
	name: "etcd", title: "etcd", order: 6,
	flag: "etcd", example: "--etcd host:port",
	env: []string{EnvEtcd, EnvEtcdUser, EnvEtcdPassword}, passwordEnv: []string{EnvEtcdPassword},
	flags: func(fs *flag.FlagSet, f *Flags) {
		fs.StringVar(&f.Etcd, "etcd", "", "etcd endpoints, host:port[,host:port...] (env "+EnvEtcd+")")
		fs.StringVar(&f.EtcdUser, "etcd-user", "", "etcd: authenticate as this user, with the password of --password-file or "+EnvEtcdPassword+" (env "+EnvEtcdUser+")")
	},
	given:   func(f *Flags) bool { return f.Etcd != "" },
	fromEnv: func(f *Flags, getenv func(string) string) { f.Etcd = getenv(EnvEtcd) },
	checkFlags: func(f *Flags, getenv func(string) string, named bool) error {
		switch {
		case f.EtcdUser != "" && !named:
			return cmdutil.Usagef("--etcd-user goes with --etcd")
		case f.PasswordFile != "" && named && f.EtcdUser == "" && getenv(EnvEtcdUser) == "":
			return cmdutil.Usagef("--password-file with --etcd is the password of --etcd-user, which is missing")
		}
		return nil
	},
	resolve: func(f *Flags, getenv func(string) string, filed string, spec *Spec) error {
		endpoints, err := parseEtcd(f.Etcd)
		if err != nil {
			return err
		}
		spec.Etcd = endpoints
		if spec.EtcdUser, spec.EtcdPassword, err = f.etcdAuth(getenv, filed); err != nil {
			return err
		}
		if f.TLS.given() {
			if spec.EtcdTLS, err = f.TLS.config(nil); err != nil {
				return err
			}
		}
		return nil
	},
	claims:    func(s Spec) bool { return len(s.Etcd) > 0 },
	describe:  func(s Spec) string { return strings.Join(s.Etcd, ",") },
	checkName: checkEtcdName,
	nodes: func(s Spec) []Node {
		var out []Node
		for _, e := range s.Etcd { // a member alone still forwards writes to its leader
			out = append(out, Node{Addr: e, Spec: Spec{Etcd: []string{e}, EtcdTLS: s.EtcdTLS}})
		}
		return out
	},
	connect: connectEtcd,
	denied:  etcdDenied,
	oncePer: true,
})

// etcdConn is a client of an etcd cluster.
type etcdConn struct {
	c   *etcdlock.Client
	cli *clientv3.Client
}

// connectEtcd makes an etcd client of the endpoints and checks that the
// cluster answers.
func connectEtcd(ctx context.Context, spec Spec, obs dlock.Observer) (conn, error) {
	if err := dialAny(ctx, "etcd", spec.Etcd); err != nil { // the client retries a refusal until its timeout
		return nil, err
	}
	if err := handshakeAny(ctx, "etcd", spec.Etcd, spec.EtcdTLS); err != nil { // and a failed handshake too
		return nil, err
	}
	cfg := clientv3.Config{
		Endpoints:   spec.Etcd,
		DialTimeout: AnswerTimeout,
		TLS:         spec.EtcdTLS,
		Logger:      zap.NewNop(),
		Context:     ctx,
		Username:    spec.EtcdUser,
		Password:    spec.EtcdPassword,
	}
	if c := spec.EtcdTLS; c != nil && c.ServerName != "" {
		// The etcd client names each endpoint's host to grpc, which
		// verifies the certificate against it, whatever the TLS
		// configuration says: --tls-server-name needs credentials that
		// keep their name. A later dial option wins over the client's.
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithTransportCredentials(serverNamed{credentials.NewTLS(c), c.ServerName}))
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, etcdRefused(err)
	}
	cctx, cancel := context.WithTimeout(ctx, AnswerTimeout)
	defer cancel()
	// A read of one key needs a leader that answers, as every lock does;
	// a user not allowed to read it was answered all the same.
	if _, err := cli.Get(clientv3.WithRequireLeader(cctx), "dlock-probe", clientv3.WithCountOnly()); err != nil && !errors.Is(err, rpctypes.ErrPermissionDenied) {
		cli.Close()
		if r := etcdRefused(err); cmdutil.IsUsage(r) {
			return nil, r
		}
		return nil, fmt.Errorf("etcd %s does not answer: %w", strings.Join(spec.Etcd, ","), err)
	}
	return &etcdConn{etcdlock.New(cli, etcdlock.WithObserver(obs), etcdlock.WithLogger(spec.log())), cli}, nil
}

func (e *etcdConn) locker(name string, o LockOptions) (dlock.Locker, error) {
	opts := []etcdlock.Option{etcdlock.WithTTL(o.TTL), etcdlock.WithMaxHold(o.MaxHold)}
	switch o.Kind {
	case KindMutex, KindFair: // an etcd mutex is a queue by revision: always fair
		return e.c.NewMutex(name, opts...), nil
	case KindRead:
		return e.c.NewRWMutex(name, opts...).Reader(), nil
	case KindWrite:
		return e.c.NewRWMutex(name, opts...).Writer(), nil
	case KindSemaphore:
		return e.c.NewSemaphore(name, o.Permits, opts...), nil
	}
	return nil, unknownKind(o.Kind)
}

func (e *etcdConn) election(name string, ttl time.Duration) (dlock.Election, error) {
	return e.c.NewElection(name, etcdlock.WithTTL(ttl)), nil
}

func (e *etcdConn) admin(name string) (dlock.Admin, string, string) { return e.c, name, name + "/" }

func (e *etcdConn) close() {
	e.c.Close()
	e.cli.Close()
}

// etcdRefused turns etcd's refusal of the command's credentials, or of
// their absence, into a UsageError (exit 64) that names the flags; other
// errors it returns as they are.
func etcdRefused(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrAuthFailed):
		return cmdutil.Usagef("%s: check --etcd-user and its password (--password-file or %s)", cmdutil.Reason(err), EnvEtcdPassword)
	case errors.Is(err, rpctypes.ErrUserEmpty), errors.Is(err, rpctypes.ErrInvalidAuthToken):
		return cmdutil.Usagef("%s: the cluster wants a user; give --etcd-user and its password (--password-file or %s)", cmdutil.Reason(err), EnvEtcdPassword)
	}
	return err
}

// etcdDenied turns a refusal that no retry heals into a UsageError: a
// user whose role may not write the lock's prefix.
func etcdDenied(err error) error {
	if errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrUserEmpty) {
		return cmdutil.Usagef("%s: grant the role of --etcd-user readwrite on the lock's prefix, NAME/", cmdutil.Reason(err))
	}
	return err
}

// handshakeAny returns nil once one of servers completes a TLS handshake
// with cfg, or if cfg is nil, and otherwise, within AnswerTimeout, an
// error naming every server's failure. The etcd client retries a failed
// handshake until its context ends, and then reports only that the
// context ended: a TLS port that is not one, or a certificate that is not
// trusted, would be "does not answer".
func handshakeAny(ctx context.Context, service string, servers []string, cfg *tls.Config) error {
	if cfg == nil {
		return nil
	}
	failed := anyAnswers(ctx, servers, func(ctx context.Context, srv string) error {
		c := cfg.Clone()
		if c.ServerName == "" {
			c.ServerName, _, _ = net.SplitHostPort(srv)
		}
		d := tls.Dialer{Config: c}
		conn, err := d.DialContext(ctx, "tcp", srv)
		if err != nil {
			return fmt.Errorf("TLS handshake with %s: %w%s", srv, err, plainHint(err))
		}
		conn.Close()
		return nil
	})
	if failed == nil {
		return nil
	}
	return fmt.Errorf("no %s server completes a TLS handshake: %w", service, joinErrs(failed))
}

// plainHint is what a failed handshake adds when the server seems to
// speak plain text on that port.
func plainHint(err error) string {
	var header tls.RecordHeaderError
	if errors.As(err, &header) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
		return " (is that port plain text? drop the TLS flags, or give the server's TLS port)"
	}
	return ""
}

// serverNamed are TLS credentials that verify the server's certificate
// against name, whichever endpoint they connect to.
type serverNamed struct {
	credentials.TransportCredentials
	name string
}

func (s serverNamed) ClientHandshake(ctx context.Context, _ string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return s.TransportCredentials.ClientHandshake(ctx, s.name, conn)
}

func (s serverNamed) Clone() credentials.TransportCredentials {
	return serverNamed{s.TransportCredentials.Clone(), s.name}
}

// etcdAuth returns the etcd user and its password: the user from
// --etcd-user or DLOCK_ETCD_USER, the password from --password-file
// (filed) or DLOCK_ETCD_PASSWORD.
func (f *Flags) etcdAuth(getenv func(string) string, filed string) (user, password string, err error) {
	user, password = cmp.Or(f.EtcdUser, getenv(EnvEtcdUser)), cmp.Or(filed, getenv(EnvEtcdPassword))
	switch {
	case user != "" && password == "":
		return "", "", cmdutil.Usagef("--etcd-user %s needs its password: give --password-file FILE or set %s", cmdutil.Quote(user), EnvEtcdPassword)
	case user == "" && password != "":
		return "", "", cmdutil.Usagef("%s is set, but no --etcd-user (or %s) says whose password it is", EnvEtcdPassword, EnvEtcdUser)
	}
	return user, password, nil
}

// The record of a lock's last successful run ("dlock run --once-per") is
// the key EtcdRunsPrefix+NAME, outside the lock's prefix NAME/, attached
// to a lease of --once-per (rounded up to whole seconds), which etcd
// ends on its own clock. How long ago the run finished is the lease's
// granted TTL less what is left of it, to the second.

// EtcdRunsPrefix is the prefix of the etcd keys of --once-per's records.
const EtcdRunsPrefix = "dlock-runs/"

func (e *etcdConn) lastRun(ctx context.Context, name string) (time.Duration, bool, error) {
	resp, err := e.cli.Get(ctx, EtcdRunsPrefix+name)
	if err != nil {
		return 0, false, fmt.Errorf("reading the record of the last run, key %s: %w", EtcdRunsPrefix+name, err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].Lease == 0 {
		return 0, false, nil
	}
	ttl, err := e.cli.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil {
		return 0, false, fmt.Errorf("reading the lease of the last run's record: %w", err)
	}
	if ttl.TTL <= 0 {
		return 0, false, nil // expired: its key is going
	}
	return time.Duration(ttl.GrantedTTL-ttl.TTL) * time.Second, true, nil
}

func (e *etcdConn) recordRun(ctx context.Context, name string, keep time.Duration) error {
	secs := int64((keep + time.Second - 1) / time.Second)
	l, err := e.cli.Grant(ctx, secs)
	if err == nil {
		_, err = e.cli.Put(ctx, EtcdRunsPrefix+name, keep.String(), clientv3.WithLease(l.ID))
		if err != nil {
			e.cli.Revoke(context.WithoutCancel(ctx), l.ID)
		}
	}
	if err != nil {
		return fmt.Errorf("recording the run, key %s: %w", EtcdRunsPrefix+name, err)
	}
	return nil
}

func (e *etcdConn) clearRun(ctx context.Context, name string) (bool, error) {
	resp, err := e.cli.Delete(ctx, EtcdRunsPrefix+name)
	if err != nil {
		return false, fmt.Errorf("removing the record of the last run, key %s: %w", EtcdRunsPrefix+name, err)
	}
	return resp.Deleted > 0, nil
}
