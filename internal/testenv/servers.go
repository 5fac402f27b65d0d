package testenv

import "github.com/dlock-go/dlock/internal/servers"

// The servers and their configurations, as package servers defines them.
type (
	Certs          = servers.Certs
	Cluster        = servers.Cluster
	ClusterConfig  = servers.ClusterConfig
	Ensemble       = servers.Ensemble
	Etcd           = servers.Etcd
	EtcdCluster    = servers.EtcdCluster
	EtcdStatus     = servers.EtcdStatus
	MariaDB        = servers.MariaDB
	Postgres       = servers.Postgres
	Proxy          = servers.Proxy
	Redis          = servers.Redis
	RedisConfig    = servers.RedisConfig
	SentinelConfig = servers.SentinelConfig
	ZooKeeper      = servers.ZooKeeper
)

// The constants of package servers.
const (
	CertName                   = servers.CertName
	EtcdBuildVersion           = servers.EtcdBuildVersion
	EtcdHeartbeat              = servers.EtcdHeartbeat
	EtcdElectionTimeout        = servers.EtcdElectionTimeout
	MariaDBUser                = servers.MariaDBUser
	MariaDBPassword            = servers.MariaDBPassword
	MariaDBDatabase            = servers.MariaDBDatabase
	PostgresUser               = servers.PostgresUser
	ZooKeeperContainerCheck    = servers.ZooKeeperContainerCheck
	ZooKeeperMaxSessionTimeout = servers.ZooKeeperMaxSessionTimeout
)

// logTailLines is how much of a server's log a failed test shows.
const logTailLines = 20

// The functions of package servers that work outside tests, for tests
// that need a server without the Start functions' cleanup, or several
// tries.
var (
	BuildEtcd             = servers.BuildEtcd
	EtcdVersion           = servers.EtcdVersion
	FreePort              = servers.FreePort
	LaunchCluster         = servers.LaunchCluster
	LaunchClusterConfig   = servers.LaunchClusterConfig
	LaunchEnsemble        = servers.LaunchEnsemble
	LaunchEnsembleTLS     = servers.LaunchEnsembleTLS
	LaunchEtcd            = servers.LaunchEtcd
	LaunchEtcdCluster     = servers.LaunchEtcdCluster
	LaunchEtcdClusterWith = servers.LaunchEtcdClusterWith
	LaunchEtcdTLS         = servers.LaunchEtcdTLS
	LaunchMariaDB         = servers.LaunchMariaDB
	LaunchPostgres        = servers.LaunchPostgres
	LaunchRedis           = servers.LaunchRedis
	LaunchSentinel        = servers.LaunchSentinel
	LaunchSentinelConfig  = servers.LaunchSentinelConfig
	LaunchZooKeeper       = servers.LaunchZooKeeper
	LaunchZooKeeperTLS    = servers.LaunchZooKeeperTLS
	LookBinary            = servers.LookBinary
	LookEtcd              = servers.LookEtcd
	LookMariaDB           = servers.LookMariaDB
	LookPostgres          = servers.LookPostgres
	LookZooKeeper         = servers.LookZooKeeper
	NewProxy              = servers.NewProxy
	StopAll               = servers.StopAll
	WriteCerts            = servers.WriteCerts
)
