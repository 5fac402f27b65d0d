package servers

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// zkKeyStoreName is the PEM file, in the server's directory, that holds
// the server's key and certificate: ZooKeeper's PEM key store wants both
// in one file.
const zkKeyStoreName = "keystore.pem"

// zkNettyJars are the Netty jars a secure client port needs that the
// Debian package's zookeeper.jar does not name in its manifest (it names
// netty-handler, which needs them).
var zkNettyJars = []string{"/usr/share/java/netty-codec.jar", "/usr/share/java/netty-resolver.jar"}

// zkTLSClassPath returns the jars to add to the class path of a server
// with a secure client port, or an error naming the package to install.
func zkTLSClassPath() (string, error) {
	for _, j := range zkNettyJars {
		if _, err := os.Stat(j); err != nil {
			return "", fmt.Errorf("servers: ZooKeeper's secure client port needs %s; install it with: apt-get install -y libnetty-java", j)
		}
	}
	return strings.Join(zkNettyJars, ":"), nil
}

// zkTLS says how a ZooKeeper serves its secure client port.
type zkTLS struct {
	certs             *Certs
	requireClientCert bool
}

// writeConf adds to b the zoo.cfg lines of a secure client port on
// 127.0.0.1:port, and writes the key store into dir. ZooKeeper passes
// the keys it does not know to itself as system properties prefixed with
// "zookeeper.", which is where the Netty connection factory and the
// ssl.* settings of its client port (X509Util, prefix "zookeeper.ssl.")
// are read from.
func (c *zkTLS) writeConf(b *strings.Builder, dir string, port int) error {
	var ks []byte
	for _, f := range []string{c.certs.ServerKey, c.certs.ServerCert} {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("servers: zookeeper key store: %w", err)
		}
		ks = append(ks, data...)
	}
	keyStore := filepath.Join(dir, zkKeyStoreName)
	if err := os.WriteFile(keyStore, ks, 0o600); err != nil {
		return fmt.Errorf("servers: zookeeper key store: %w", err)
	}
	clientAuth := "none"
	if c.requireClientCert {
		clientAuth = "need"
	}
	b.WriteString("serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n")
	fmt.Fprintf(b, "secureClientPortAddress=127.0.0.1\nsecureClientPort=%d\n", port)
	fmt.Fprintf(b, "ssl.keyStore.location=%s\nssl.keyStore.type=PEM\n", keyStore)
	fmt.Fprintf(b, "ssl.trustStore.location=%s\nssl.trustStore.type=PEM\n", c.certs.CA)
	fmt.Fprintf(b, "ssl.clientAuth=%s\n", clientAuth)
	return nil
}

// LaunchZooKeeperTLS starts a standalone server as LaunchZooKeeper does,
// which also serves TLS on a secure client port (see TLSAddr) with the
// server certificate of certs, and trusts client certificates signed by
// its CA. If requireClientCert is true the server refuses a client that
// presents none; otherwise it asks for none. The plain client port stays
// open, for four-letter words and tests that need no TLS. The caller must
// Close the returned ZooKeeper.
func LaunchZooKeeperTLS(certs *Certs, requireClientCert bool) (*ZooKeeper, error) {
	if certs == nil {
		return nil, fmt.Errorf("servers: LaunchZooKeeperTLS: no certificates; make them with NewCerts")
	}
	return launchZooKeeper(&zkTLS{certs: certs, requireClientCert: requireClientCert})
}

// LaunchEnsembleTLS starts an ensemble as LaunchEnsemble does, every
// server of which also serves TLS on a secure client port, as
// LaunchZooKeeperTLS's does.
func LaunchEnsembleTLS(n int, certs *Certs, requireClientCert bool) (*Ensemble, error) {
	if certs == nil {
		return nil, fmt.Errorf("servers: LaunchEnsembleTLS: no certificates; make them with NewCerts or WriteCerts")
	}
	// A port another process took between FreePort and the start (more
	// likely with four test packages at once) makes every server start
	// again on new ports.
	return launchRetrying(func() (*Ensemble, error) {
		return launchEnsemble(n, &zkTLS{certs: certs, requireClientCert: requireClientCert})
	})
}

// addTLS gives a server that has not started a secure client port.
func (z *ZooKeeper) addTLS(tls *zkTLS) error {
	extra, err := zkTLSClassPath()
	if err != nil {
		return err
	}
	z.tls = tls
	z.classpath += ":" + extra
	z.tlsPort, err = FreePort()
	return err
}

// TLSAddr returns the server's secure client address, "127.0.0.1:port",
// or "" if it has none.
func (z *ZooKeeper) TLSAddr() string {
	if z.tlsPort == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(z.tlsPort))
}

// zkTLSProbeTimeout bounds one TLS handshake of waitTLSPortLocked: the
// JVM's first handshake after a start loads and compiles its TLS code,
// which took 11 to 18 seconds on a loaded 2-core machine (later ones,
// under a second).
const zkTLSProbeTimeout = 30 * time.Second

// waitTLSPortLocked waits until the secure client port completes a TLS
// handshake with the client certificate and answers ruok, so that a
// client's first handshake does not pay for the JVM's warm-up. z.mu must
// be held.
func (z *ZooKeeper) waitTLSPortLocked() error {
	cfg, err := z.tls.clientConfig()
	if err != nil {
		return err
	}
	return z.waitLocked(zkStartTimeout, 50*time.Millisecond, "complete a TLS handshake on its secure client port "+z.TLSAddr(), func() error {
		c, err := net.DialTimeout("tcp", z.TLSAddr(), zkProbeTimeout)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(zkTLSProbeTimeout))
		// Under TLS 1.3 the server checks the client certificate after
		// the client's handshake: an answer to ruok says it has.
		tc := tls.Client(c, cfg)
		if _, err := tc.Write([]byte("ruok")); err != nil {
			return err
		}
		reply, err := io.ReadAll(tc)
		if string(reply) != "imok" {
			return fmt.Errorf("ruok over TLS: %q, %v", reply, err)
		}
		return nil
	})
}

// clientConfig returns a client's TLS configuration for the server on
// 127.0.0.1: trusting the CA of c.certs, with its client certificate.
func (c *zkTLS) clientConfig() (*tls.Config, error) {
	ca, err := os.ReadFile(c.certs.CA)
	if err != nil {
		return nil, fmt.Errorf("servers: zookeeper TLS probe: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("servers: zookeeper TLS probe: no certificate in %s", c.certs.CA)
	}
	cert, err := tls.LoadX509KeyPair(c.certs.ClientCert, c.certs.ClientKey)
	if err != nil {
		return nil, fmt.Errorf("servers: zookeeper TLS probe: %w", err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, ServerName: "127.0.0.1"}, nil
}
