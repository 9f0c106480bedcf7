package registry

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapToSlog returns a zap logger that writes entries at or above min to l,
// so etcd's own logs end up with drover's. While *quiet is true (during a
// deliberate shutdown, when etcd reports its closed listeners as errors)
// entries go out at debug level. quiet may be nil.
func zapToSlog(l *slog.Logger, min zapcore.Level, quiet *atomic.Bool) *zap.Logger {
	if l == nil {
		l = slog.Default()
	}
	return zap.New(&slogCore{l: l, min: min, quiet: quiet})
}

type slogCore struct {
	l      *slog.Logger
	min    zapcore.Level
	quiet  *atomic.Bool
	fields []zapcore.Field
}

func (c *slogCore) Enabled(lvl zapcore.Level) bool { return lvl >= c.min }

func (c *slogCore) With(fs []zapcore.Field) zapcore.Core {
	return &slogCore{l: c.l, min: c.min, quiet: c.quiet, fields: append(slices.Clip(c.fields), fs...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fs {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	attrs := make([]slog.Attr, 0, len(keys)+1)
	if e.LoggerName != "" {
		attrs = append(attrs, slog.String("logger", e.LoggerName))
	}
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, enc.Fields[k]))
	}
	lvl := slog.LevelError
	switch {
	case e.Level < zapcore.InfoLevel:
		lvl = slog.LevelDebug
	case e.Level == zapcore.InfoLevel:
		lvl = slog.LevelInfo
	case e.Level == zapcore.WarnLevel:
		lvl = slog.LevelWarn
	}
	// While closing, etcd's complaints about its closed listeners are
	// expected and kept quiet; its fatal errors never are: zap exits the
	// process after writing one, and a process that ended without a word
	// (status 1, nothing on stderr) is what this line would explain.
	if c.quiet != nil && c.quiet.Load() && e.Level < zapcore.DPanicLevel {
		lvl = slog.LevelDebug
	}
	c.l.LogAttrs(context.Background(), lvl, e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }
