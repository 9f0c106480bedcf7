package registry

import (
	"bytes"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/zap/zapcore"
)

// TestClosingEtcdKeepsQuietButForFatalErrors: while the embedded etcd
// closes, its errors are logged at debug (its closed listeners), but a
// fatal one stays an error: zap exits the process after writing it, and
// the process must not end without saying why.
func TestClosingEtcdKeepsQuietButForFatalErrors(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var quiet atomic.Bool
	quiet.Store(true)
	core := &slogCore{l: l, min: zapcore.ErrorLevel, quiet: &quiet}
	core.Write(zapcore.Entry{Level: zapcore.ErrorLevel, Message: "listener closed"}, nil)
	core.Write(zapcore.Entry{Level: zapcore.FatalLevel, Message: "failed to create WAL"}, nil)
	out := buf.String()
	if strings.Contains(out, "listener closed") {
		t.Errorf("an error while closing was logged above debug:\n%s", out)
	}
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "failed to create WAL") {
		t.Errorf("a fatal error while closing was not logged as an error:\n%s", out)
	}
}
