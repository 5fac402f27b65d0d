package servers

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Certs are throwaway PEM files for TLS tests: a CA, a server certificate
// it signed for 127.0.0.1 and the name "localhost", another for the name
// CertName alone, and a client certificate it signed.
type Certs struct {
	Dir                   string
	CA                    string // the CA's certificate
	ServerCert, ServerKey string
	ClientCert, ClientKey string
	// NamedCert and NamedKey are a server certificate for CertName, not
	// for 127.0.0.1: a client that connects to 127.0.0.1 accepts it only
	// when told to expect that name.
	NamedCert, NamedKey string
}

// CertName is the only name Certs.NamedCert carries.
const CertName = "server.dlock.test"

// WriteCerts writes a new CA and the certificates it signs into dir, which
// must exist.
func WriteCerts(dir string) (*Certs, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("servers: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "dlock test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("servers: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("servers: %w", err)
	}
	c := &Certs{Dir: dir, CA: filepath.Join(dir, "ca.pem")}
	if err := writePEM(c.CA, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage, dnsOnly ...string) (certFile, keyFile string, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return "", "", fmt.Errorf("servers: %w", err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		switch {
		case len(dnsOnly) > 0:
			tmpl.DNSNames = dnsOnly
		case usage == x509.ExtKeyUsageServerAuth:
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
			tmpl.DNSNames = []string{"localhost"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return "", "", fmt.Errorf("servers: %w", err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return "", "", fmt.Errorf("servers: %w", err)
		}
		certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return "", "", err
		}
		return certFile, keyFile, writePEM(keyFile, "PRIVATE KEY", keyDER)
	}
	if c.ServerCert, c.ServerKey, err = leaf("server", 2, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	if c.ClientCert, c.ClientKey, err = leaf("client", 3, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	if c.NamedCert, c.NamedKey, err = leaf("named", 4, x509.ExtKeyUsageServerAuth, CertName); err != nil {
		return nil, err
	}
	return c, nil
}

func writePEM(path, kind string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("servers: %w", err)
	}
	return nil
}

// RedisTLSArgs are the redis-server arguments that add a TLS port using c,
// requiring client certificates; the plain port stays for the test's own
// commands.
func (c *Certs) RedisTLSArgs(port int) []string {
	return []string{"--tls-port", strconv.Itoa(port), "--tls-cert-file", c.ServerCert, "--tls-key-file", c.ServerKey,
		"--tls-ca-cert-file", c.CA, "--tls-auth-clients", "yes"}
}
