package run

import "testing"

// The metrics server bounds every phase of a connection, so that clients
// that send slowly, read slowly or idle cannot pile up connections.
func TestMetricsServerHasTimeouts(t *testing.T) {
	m, err := serveMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	s := m.srv
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 {
		t.Errorf("timeouts: header %v, read %v, write %v, idle %v; want all set", s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout)
	}
}
