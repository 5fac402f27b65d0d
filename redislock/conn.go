package redislock

import "github.com/dlock-go/dlock/redisconn"

// A Conn is the transport to one Redis deployment (standalone, Sentinel or
// Cluster): goredisconn.New(rdb) for go-redis v9, rueidisconn.New(client)
// for rueidis. Package redisconn defines it, for those who write their own;
// redlock.New and fence.NewRedis take the same Conn.
type Conn = redisconn.Conn
