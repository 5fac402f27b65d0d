package redislock_test

import (
	"testing"

	"github.com/dlock-go/dlock/dlocktest"
)

func TestIntegrationElectionStandalone(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			dlocktest.RunElection(t, electionBackend(standalone(t), tr.open))
		})
	}
}

func TestIntegrationElectionCluster(t *testing.T) {
	dlocktest.RunElection(t, electionBackend(cluster(t), goRedis))
}
