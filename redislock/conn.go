package redislock

import "github.com/dlock-go/dlock/redislock/transport"

// A Conn is the transport to one Redis deployment (standalone, Sentinel or
// Cluster): goredisconn.New(rdb) for go-redis v9, rueidisconn.New(client)
// for rueidis. Package transport defines it, for those who write their own.
type Conn = transport.Conn
