package lockbench

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dlock-go/dlock/internal/servers"
)

// ZKServers is the size of the ensemble Z1 and Z2 run against.
const ZKServers = 3

// zkCluster is the benchmark's own ZooKeeper ensemble: ZKServers servers
// on 127.0.0.1, started through internal/servers (Debian package).
type zkCluster struct {
	e       *servers.Ensemble
	version string
	// ordered are the servers' addresses, the followers first and the
	// leader last: client i of a run connects to ordered[i%ZKServers] alone,
	// so that every contender's clients meet the same servers.
	ordered []string
}

func startZK() (*zkCluster, error) {
	e, err := servers.LaunchEnsemble(ZKServers)
	if err != nil {
		return nil, err
	}
	z := &zkCluster{e: e, version: "unknown"}
	leader, err := e.Leader()
	if err != nil {
		e.Close()
		return nil, err
	}
	for _, srv := range e.Servers {
		if srv != leader {
			z.ordered = append(z.ordered, srv.Addr())
		}
	}
	z.ordered = append(z.ordered, leader.Addr())
	if out, err := e.Servers[0].FourLetter("mntr"); err == nil {
		v := mntrFields(out)["zk_version"]
		v, _, _ = strings.Cut(v, ",")
		v, _, _ = strings.Cut(v, "-") // "3.8.0-${mvngit.commit.id}, built on …"
		z.version = strings.TrimSpace(v)
	}
	return z, nil
}

func (z *zkCluster) addrs() []string { return z.e.Addrs() }

// serverFor returns the one-address server list of client i of a run.
func (z *zkCluster) serverFor(i int) []string { return []string{z.ordered[i%len(z.ordered)]} }
func (z *zkCluster) close() error             { return z.e.Close() }

// zkStats is the sum over the ensemble's servers of the mntr counters
// that Z1 and Z2 report. Each is counted by the server a request arrived
// at, so the sum counts every client request once.
type zkStats struct {
	packets  float64 // zk_packets_received: every request packet, pings and four-letter words included
	reads    float64 // zk_cnt_readlatency: non-quorum requests (getChildren, getData, exists, ping)
	writes   float64 // zk_cnt_updatelatency: quorum requests (create, delete, session create/close)
	children float64 // zk_response_packet_get_children_cache_{hits,misses}: getChildren replies
	getData  float64 // zk_response_packet_cache_{hits,misses}: getData replies
	watches  float64 // zk_sum_node_{deleted,changed,children,created}_watch_count: watches fired
}

var zkStatKeys = map[string]func(*zkStats) *float64{
	"zk_packets_received":                          func(s *zkStats) *float64 { return &s.packets },
	"zk_cnt_readlatency":                           func(s *zkStats) *float64 { return &s.reads },
	"zk_cnt_updatelatency":                         func(s *zkStats) *float64 { return &s.writes },
	"zk_response_packet_get_children_cache_hits":   func(s *zkStats) *float64 { return &s.children },
	"zk_response_packet_get_children_cache_misses": func(s *zkStats) *float64 { return &s.children },
	"zk_response_packet_cache_hits":                func(s *zkStats) *float64 { return &s.getData },
	"zk_response_packet_cache_misses":              func(s *zkStats) *float64 { return &s.getData },
	"zk_sum_node_deleted_watch_count":              func(s *zkStats) *float64 { return &s.watches },
	"zk_sum_node_changed_watch_count":              func(s *zkStats) *float64 { return &s.watches },
	"zk_sum_node_children_watch_count":             func(s *zkStats) *float64 { return &s.watches },
	"zk_sum_node_created_watch_count":              func(s *zkStats) *float64 { return &s.watches },
}

// snapshot sends mntr to every server (one four-letter-word connection
// each, which itself counts as one received packet) and sums the counters.
func (z *zkCluster) snapshot() (zkStats, error) {
	var st zkStats
	for _, srv := range z.e.Servers {
		out, err := srv.FourLetter("mntr")
		if err != nil {
			return zkStats{}, fmt.Errorf("mntr on %s: %w", srv.Addr(), err)
		}
		f := mntrFields(out)
		if _, ok := f["zk_packets_received"]; !ok {
			return zkStats{}, errors.New("mntr on " + srv.Addr() + ": no zk_packets_received line")
		}
		for k, field := range zkStatKeys {
			if v, err := strconv.ParseFloat(f[k], 64); err == nil {
				*field(&st) += v
			}
		}
	}
	return st, nil
}

func (a zkStats) sub(b zkStats) zkStats {
	return zkStats{packets: a.packets - b.packets, reads: a.reads - b.reads, writes: a.writes - b.writes,
		children: a.children - b.children, getData: a.getData - b.getData, watches: a.watches - b.watches}
}

// mntrFields parses mntr's "key\tvalue" lines.
func mntrFields(out string) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(out) {
		if k, v, ok := strings.Cut(strings.TrimRight(line, "\r\n"), "\t"); ok {
			m[k] = v
		}
	}
	return m
}
