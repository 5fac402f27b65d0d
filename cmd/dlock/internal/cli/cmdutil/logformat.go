package cmdutil

import (
	"io"
	"log/slog"
)

// The log formats of --log-format.
const (
	LogText = "text" // slog's text handler: time=... level=... msg=... lock=... kind=...
	LogJSON = "json" // slog's JSON handler: one JSON object a line
)

// LogFormats lists the values of --log-format, the default first.
var LogFormats = []string{LogText, LogJSON}

// NewLogger returns a logger writing records of level and above to w in
// format (LogText or LogJSON). Both formats have the same fields: time,
// level, msg, then the record's own (dlock.LogObserver's lock, kind,
// fence, wait, held, err). In JSON, durations are numbers of seconds, as
// in the metrics (wait_seconds); in text, Go durations such as 12.5ms.
func NewLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	if format == LogJSON {
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: secondsJSON}))
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// secondsJSON writes durations as seconds.
func secondsJSON(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.Float64(a.Key, a.Value.Duration().Seconds())
	}
	return a
}
