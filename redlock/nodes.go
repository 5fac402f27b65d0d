package redlock

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock/redisconn"
)

// nodeState is what a Client has learnt about one node.
type nodeState struct {
	mu sync.Mutex
	// epoch is the creation time (ms, the node's clock) of the node's
	// epoch as this client last saw it; 0 before the first answer.
	epoch int64
	// reset: the epoch changed while this client watched, so the node
	// lost its data at the new epoch's creation (see judge).
	reset bool
	fsync fsyncMode
	// checked is when the last configuration check began; checking
	// while one runs.
	checked  time.Time
	checking bool
	warned   map[string]bool // warnings already logged
}

// fsyncMode is what a node's configuration says about persistence.
type fsyncMode uint8

const (
	fsyncUnknown fsyncMode = iota // not read yet, or the node refused CONFIG GET
	fsyncNot                      // not every write is on disk before the reply
	fsyncAlways                   // appendonly yes and appendfsync always
)

// configEvery is how often a Client reads a node's configuration again
// while it uses the node.
const configEvery = time.Minute

// A commander is a Conn that can also send a plain command; the Conns of
// goredisconn and rueidisconn can. Restart detection reads CONFIG GET
// through it.
type commander interface {
	Command(ctx context.Context, args ...string) redisconn.Result
}

// checkSoon reads, in the background, the configuration of every node
// whose configuration has not been read for configEvery.
func (c *Client) checkSoon() {
	for i, st := range c.state {
		st.mu.Lock()
		due := !st.checking && time.Since(st.checked) >= configEvery
		if due {
			st.checking, st.checked = true, time.Now()
		}
		st.mu.Unlock()
		if due && !c.background.Go(func(ctx context.Context) { c.checkConfig(ctx, i) }) {
			st.mu.Lock()
			st.checking = false
			st.mu.Unlock()
		}
	}
}

// checkConfig reads node i's persistence and eviction settings. A node
// whose appendfsync cannot be read is treated as one that does not persist
// every write: after a restart it abstains for the window. A node that may
// evict keys is warned about: eviction deletes lock keys, and a node that
// lost a lock key can vote for a second holder.
func (c *Client) checkConfig(ctx context.Context, i int) {
	st := c.state[i]
	defer func() {
		st.mu.Lock()
		st.checking = false
		st.mu.Unlock()
	}()
	name := c.nodes[i].name
	cmd, ok := c.nodes[i].conn.(commander)
	if !ok {
		c.warn(i, slog.LevelInfo, "no-command", fmt.Sprintf("redlock: node %s: its Conn cannot send CONFIG GET, so dlock cannot tell whether it persists every write (appendfsync always) or may evict lock keys (maxmemory-policy); after a restart it abstains for the restart window", name))
		return
	}
	get := func(param string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, max(c.cfg.nodeTimeout, time.Second))
		defer cancel()
		r := cmd.Command(ctx, "CONFIG", "GET", param)
		if r.Err != nil {
			return "", r.Err
		}
		return configValue(r.Val, param)
	}
	mode := fsyncNot
	aof, err := get("appendonly")
	var fsync string
	if err == nil {
		fsync, err = get("appendfsync")
	}
	switch {
	case err != nil:
		mode = fsyncUnknown
		c.warn(i, slog.LevelInfo, "config", fmt.Sprintf("redlock: node %s refused CONFIG GET (%v): dlock cannot tell whether it persists every write, so after a restart it abstains for the restart window even with appendfsync always, and cannot check maxmemory-policy; allow CONFIG GET for this user to lift both", name, err))
	case aof == "yes" && fsync == "always":
		mode = fsyncAlways
	}
	st.mu.Lock()
	st.fsync = mode
	st.mu.Unlock()
	if err != nil {
		return
	}
	policy, err := get("maxmemory-policy")
	if err != nil {
		return
	}
	limit, err := get("maxmemory")
	if err != nil {
		return
	}
	if n, _ := strconv.ParseInt(limit, 10, 64); n > 0 && policy != "noeviction" {
		c.warn(i, slog.LevelWarn, "evict:"+policy, fmt.Sprintf("redlock: node %s may evict lock keys (maxmemory %s, maxmemory-policy %s): a node that evicted a lock key can vote for a second holder while the first one's lease is valid; set maxmemory-policy noeviction on lock nodes", name, limit, policy))
	}
}

// configValue returns the value of param in a CONFIG GET reply: a
// [name, value] array (RESP2) or a map (RESP3).
func configValue(v any, param string) (string, error) {
	switch r := v.(type) {
	case []any:
		for j := 0; j+1 < len(r); j += 2 {
			if k, _ := r[j].(string); strings.EqualFold(k, param) {
				s, _ := r[j+1].(string)
				return s, nil
			}
		}
	case map[any]any:
		if s, ok := r[param].(string); ok {
			return s, nil
		}
	case map[string]any:
		if s, ok := r[param].(string); ok {
			return s, nil
		}
	}
	return "", fmt.Errorf("CONFIG GET %s: unexpected reply %T %v", param, v, v)
}

// warn logs a message about node i once per key, through WithLogger's
// logger. A warning (slog.LevelWarn: a node configured so that locks are
// not safe) goes to slog.Default() when the Client has no logger, so that
// it does not go unnoticed.
func (c *Client) warn(i int, level slog.Level, key, msg string) {
	log := c.cfg.log
	if log == nil && level < slog.LevelWarn {
		return
	}
	if log == nil {
		log = slog.Default()
	}
	st := c.state[i]
	st.mu.Lock()
	if st.warned == nil {
		st.warned = map[string]bool{}
	}
	seen := st.warned[key]
	st.warned[key] = true
	st.mu.Unlock()
	if !seen {
		log.Log(context.Background(), level, msg, slog.String("node", c.nodes[i].name))
	}
}
