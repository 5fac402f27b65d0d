package backend

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// Environment variables of the TLS flags.
const (
	EnvTLSCA         = "DLOCK_TLS_CA"
	EnvTLSCert       = "DLOCK_TLS_CERT"
	EnvTLSKey        = "DLOCK_TLS_KEY"
	EnvTLSServerName = "DLOCK_TLS_SERVER_NAME"
)

// TLSFlags say how to reach a lock service over TLS.
type TLSFlags struct {
	CA, Cert, Key, ServerName string
}

func (f *TLSFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.CA, "tls-ca", "", "PEM file of the CA that signed the server's certificate, instead of the system's (env "+EnvTLSCA+"); Redis needs rediss://, and any TLS flag turns TLS on for ZooKeeper (its secure client port) and PostgreSQL (verify-full)")
	fs.StringVar(&f.Cert, "tls-cert", "", "PEM file of a client certificate, for servers that require one (env "+EnvTLSCert+"); with --tls-key")
	fs.StringVar(&f.Key, "tls-key", "", "PEM file of the client certificate's private key (env "+EnvTLSKey+")")
	fs.StringVar(&f.ServerName, "tls-server-name", "", "the name the server's certificate must carry, when it is not the URL's host (env "+EnvTLSServerName+")")
}

// resolve fills the flags not given from the environment.
func (f *TLSFlags) resolve(getenv func(string) string) {
	for _, v := range []struct {
		p   *string
		env string
	}{{&f.CA, EnvTLSCA}, {&f.Cert, EnvTLSCert}, {&f.Key, EnvTLSKey}, {&f.ServerName, EnvTLSServerName}} {
		if *v.p == "" {
			*v.p = getenv(v.env)
		}
	}
}

func (f *TLSFlags) given() bool {
	return f.CA != "" || f.Cert != "" || f.Key != "" || f.ServerName != ""
}

// config returns the TLS configuration the flags describe, on top of
// go-redis's for a rediss:// URL (which names the host to verify).
func (f *TLSFlags) config(base *tls.Config) (*tls.Config, error) {
	c := base.Clone()
	if c == nil {
		c = &tls.Config{}
	}
	c.MinVersion = max(c.MinVersion, tls.VersionTLS12)
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, cmdutil.Usagef("--tls-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, cmdutil.Usagef("--tls-ca %s holds no PEM certificate", f.CA)
		}
		c.RootCAs = pool
	}
	switch {
	case f.Cert != "" && f.Key == "":
		return nil, cmdutil.Usagef("--tls-cert needs --tls-key, the file of its private key")
	case f.Key != "" && f.Cert == "":
		return nil, cmdutil.Usagef("--tls-key needs --tls-cert, the file of its certificate")
	case f.Cert != "":
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, cmdutil.Usagef("--tls-cert/--tls-key: %v", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	if f.ServerName != "" {
		c.ServerName = f.ServerName
	}
	return c, nil
}

// applyPostgres makes every connection of cfg use TLS as the flags say,
// verifying the server's certificate and host name (libpq's
// sslmode=verify-full), with no fallback to plain TCP, whatever the URL's
// sslmode said.
func (f *TLSFlags) applyPostgres(cfg *pgxpool.Config) error {
	c, err := f.config(nil)
	if err != nil {
		return err
	}
	if c.ServerName == "" {
		c.ServerName = cfg.ConnConfig.Host
	}
	cfg.ConnConfig.TLSConfig = c
	cfg.ConnConfig.Fallbacks = nil
	return nil
}

// applyTLS sets up TLS for one Redis URL's options: the flags apply to
// rediss:// URLs, and are refused with redis:// (plain TCP) ones. A URL
// that turns verification off (skip_verify=true) adds a warning.
func (f *TLSFlags) applyTLS(o *redis.Options, shown string, warnings *[]string) error {
	if o.TLSConfig == nil {
		if f.given() {
			return cmdutil.Usagef("--redis %q is plain TCP, but TLS flags were given; use rediss:// for TLS", shown)
		}
		return nil
	}
	c, err := f.config(o.TLSConfig)
	if err != nil {
		return err
	}
	o.TLSConfig = c
	if c.InsecureSkipVerify {
		*warnings = append(*warnings, fmt.Sprintf("WARNING: --redis %q has skip_verify=true: the server's certificate is not checked, so anyone on the path can pose as the lock service and grant locks to two holders", shown))
	}
	return nil
}
