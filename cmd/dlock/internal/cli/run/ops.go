package run

import (
	"flag"
	"log/slog"
	"strings"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// registerOps registers the flags for operators: metrics for short jobs
// and the log format.
func registerOps(fs *flag.FlagSet, o *Options) {
	fs.StringVar(&o.MetricsPush, "metrics-push", "", "push the lock's metrics to this Prometheus Pushgateway when the lock is granted, when it is lost and when dlock exits: its URL (the job is NAME), or a group's, such as http://127.0.0.1:9091/metrics/job/nightly/host/web1")
	fs.StringVar(&o.MetricsTextfile, "metrics-textfile", "", "write the lock's metrics, at the same moments as --metrics-push, to this file (a name ending in .prom) for node_exporter's textfile collector: atomically, through a temporary file in its directory")
	o.LogFormat = cmdutil.LogText
	fs.Var(cmdutil.ChoiceFlag{S: &o.LogFormat, Values: cmdutil.LogFormats}, "log-format", "format of dlock's own stderr lines and of the -v log: "+strings.Join(cmdutil.LogFormats, " or ")+" (one JSON object a line)")
}

// logger returns the logger of -v and of dlock's own lines with
// --log-format json: one for the whole run (run sets r.log first thing),
// so that its lines never interleave.
func (r *runner) logger() *slog.Logger {
	if r.log != nil {
		return r.log
	}
	return cmdutil.NewLogger(r.io.Err, r.o.LogFormat, slog.LevelDebug)
}
