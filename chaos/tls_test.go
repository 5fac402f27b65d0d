package chaos

import (
	"strings"
	"testing"
)

// Options.TLS is refused, before anything starts, on the backends that do
// not run with it, with an error that names them.
func TestTLSOnlyWhereSupported(t *testing.T) {
	for _, b := range Backends {
		_, err := Options{Backend: b, TLS: true}.resolve()
		switch {
		case TLSBackend(b) && err != nil:
			t.Errorf("%s with TLS: %v", b, err)
		case !TLSBackend(b) && (err == nil || !strings.Contains(err.Error(), b) || !strings.Contains(err.Error(), "TLS")):
			t.Errorf("%s with TLS: %v; want an error naming the backend and TLS", b, err)
		}
	}
	if !TLSBackend(BackendRedlock3) || !TLSBackend(BackendZK3) || TLSBackend(BackendCluster) {
		t.Errorf("TLSBackend: redlock3 %v, zk3 %v, cluster %v", TLSBackend(BackendRedlock3), TLSBackend(BackendZK3), TLSBackend(BackendCluster))
	}
}
