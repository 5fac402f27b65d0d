package chaos

import (
	"slices"
	"testing"
)

// TestServicesCoverBackends checks that every backend has one registered
// service, and that every service's backends are Backends.
func TestServicesCoverBackends(t *testing.T) {
	var registered []string
	for _, s := range services {
		registered = append(registered, s.backends...)
		for f := range s.injects {
			for _, b := range s.backends {
				if !slices.Contains(recordedFaults(b), f) {
					t.Errorf("%s injects %s, which FaultsFor(%s) lacks", b, f, b)
				}
			}
		}
	}
	for _, b := range Backends {
		if serviceOf(b) == nil {
			t.Errorf("backend %s has no service", b)
		}
	}
	for _, b := range registered {
		if !slices.Contains(Backends, b) {
			t.Errorf("service backend %s is not in Backends", b)
		}
	}
	if len(registered) != len(Backends) {
		t.Errorf("%d backends registered, %d in Backends", len(registered), len(Backends))
	}
}
