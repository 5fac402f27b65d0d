package lockbench

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// rueidislockRouterContender is rueidislock made to run Redlock over
// independent masters: its LockerOption.ClientBuilder returns a router, a
// rueidis.Client over one rueidis client per node that sends each command
// to the node its key's index names (rueidislock's keys are
// "<prefix>:<i>:<name>", i < 2×KeyMajority−1; key i goes to node i). This
// is the "rueidislock router" issue 35 compares S4b with; rueidislock has
// no such mode of its own (see rueidislockRedlockProbe).
func rueidislockRouterContender() Contender {
	return Contender{
		Name:      "rueidislock-router",
		OpenNodes: openRueidislockRouter,
		Config: "github.com/redis/rueidis/rueidislock " + moduleVersion("github.com/redis/rueidis") + " with `KeyMajority: 3` " +
			"(5 keys), `NoLoopTracking: true`, client-side caching on (its wake-up), other options default; its " +
			"`ClientBuilder` returns a router over one rueidis client per node (the LockerOption's ClientOption, " +
			"InitAddress one node) that sends each command to the node its key's index names (benchmark code, " +
			"`contender_router.go`). `WithContext` to lock, its cancel func to release.",
	}
}

func openRueidislockRouter(addrs []string) (Client, error) {
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption:   rueidis.ClientOption{InitAddress: addrs[:1]},
		KeyMajority:    int32(len(addrs)/2 + 1),
		NoLoopTracking: true,
		ClientBuilder: func(opt rueidis.ClientOption) (rueidis.Client, error) {
			r := &router{}
			for _, a := range addrs {
				o := opt
				o.InitAddress = []string{a}
				c, err := rueidis.NewClient(o)
				if err != nil {
					r.Close()
					return nil, fmt.Errorf("node %s: %w", a, err)
				}
				r.nodes = append(r.nodes, c)
			}
			r.Client = r.nodes[0]
			return r, nil
		},
	})
	if err != nil {
		return nil, err
	}
	return &rueidislockClient{l: l}, nil
}

// router is a rueidis.Client that sends Do to the node named by the index
// in its key; the other methods go to node 0 (rueidislock uses only Do,
// through rueidis.Lua.Exec).
type router struct {
	rueidis.Client // nodes[0]
	nodes          []rueidis.Client
}

// node returns the client of cmd's key: "<prefix>:<i>:<name>" goes to
// node i; a command without such a key to node 0.
func (r *router) node(cmd rueidis.Completed) rueidis.Client {
	args := cmd.Commands()
	var key string
	switch strings.ToUpper(args[0]) {
	case "EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO":
		if len(args) > 3 {
			key = args[3]
		}
	default:
		if len(args) > 1 {
			key = args[1]
		}
	}
	if _, rest, ok := strings.Cut(key, ":"); ok {
		if i, _, ok := strings.Cut(rest, ":"); ok {
			if n, err := strconv.Atoi(i); err == nil && n >= 0 && n < len(r.nodes) {
				return r.nodes[n]
			}
		}
	}
	return r.nodes[0]
}

func (r *router) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return r.node(cmd).Do(ctx, cmd)
}

func (r *router) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	out := make([]rueidis.RedisResult, len(multi))
	for i, cmd := range multi {
		out[i] = r.Do(ctx, cmd)
	}
	return out
}

func (r *router) Close() {
	for _, c := range r.nodes {
		c.Close()
	}
}
