package servers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// etcdHTTP is the client of the probes; its timeout bounds each probe.
var etcdHTTP = &http.Client{Timeout: etcdProbeTimeout}

// health asks the server's /health endpoint whether it is serving with a
// leader.
func (e *Etcd) health() error {
	resp, err := etcdHTTP.Get(e.clientURL() + "/health")
	if err != nil {
		return fmt.Errorf("servers: etcd %s: %w", e.Addr(), err)
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err := json.Unmarshal(body, &h); err != nil {
		return fmt.Errorf("servers: etcd %s: /health answered %s %q", e.Addr(), resp.Status, body)
	}
	if h.Health != "true" {
		return fmt.Errorf("servers: etcd %s is not healthy: %s", e.Addr(), bytes.TrimSpace(body))
	}
	return nil
}

// EtcdStatus is a server's answer to a maintenance status request.
type EtcdStatus struct {
	MemberID uint64 // this member's ID
	Leader   uint64 // the leader's member ID, 0 if there is none
	Revision int64  // the key-value store's current revision
	RaftTerm uint64
}

// status asks the server for its maintenance status through the gRPC
// gateway, so that this package needs no etcd client.
func (e *Etcd) status() (EtcdStatus, error) {
	resp, err := etcdHTTP.Post(e.clientURL()+"/v3/maintenance/status", "application/json", bytes.NewReader([]byte("{}")))
	if err != nil {
		return EtcdStatus{}, fmt.Errorf("servers: etcd %s: %w", e.Addr(), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	// The gateway writes 64-bit integers as JSON strings.
	var s struct {
		Header struct {
			MemberID string `json:"member_id"`
			Revision string `json:"revision"`
			RaftTerm string `json:"raft_term"`
		} `json:"header"`
		Leader string `json:"leader"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &s) != nil {
		return EtcdStatus{}, fmt.Errorf("servers: etcd %s: status answered %s %q", e.Addr(), resp.Status, body)
	}
	var st EtcdStatus
	var errs [4]error
	st.MemberID, errs[0] = parseUintOrZero(s.Header.MemberID)
	st.Leader, errs[1] = parseUintOrZero(s.Leader)
	st.RaftTerm, errs[2] = parseUintOrZero(s.Header.RaftTerm)
	var rev uint64
	rev, errs[3] = parseUintOrZero(s.Header.Revision)
	st.Revision = int64(rev)
	for _, err := range errs {
		if err != nil {
			return EtcdStatus{}, fmt.Errorf("servers: etcd %s: status %q: %w", e.Addr(), body, err)
		}
	}
	return st, nil
}

// parseUintOrZero parses a decimal uint64; an empty string, which the
// gateway writes for zero, is 0.
func parseUintOrZero(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	return strconv.ParseUint(s, 10, 64)
}

// Metric reads the server's Prometheus metrics (/metrics) and returns the
// sum of the series of the metric called name whose labels include each of
// labels, given as they appear there (`grpc_method="Txn"`). The series of
// a metric with no match count as 0; so does a metric the server does not
// have.
func (e *Etcd) Metric(name string, labels ...string) (float64, error) {
	resp, err := etcdHTTP.Get(e.clientURL() + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("servers: etcd %s: %w", e.Addr(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("servers: etcd %s: /metrics answered %s: %v", e.Addr(), resp.Status, err)
	}
	return sumMetric(string(body), name, labels), nil
}

// sumMetric sums, in Prometheus text exposition, the series of name whose
// labels include each of labels.
func sumMetric(text, name string, labels []string) float64 {
	var sum float64
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		series, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		metric, lbls, _ := strings.Cut(series, "{")
		if metric != name {
			continue
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(lbls, l) {
				match = false
			}
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); match && err == nil {
			sum += v
		}
	}
	return sum
}
