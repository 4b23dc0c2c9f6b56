package etcdtest

import (
	"strings"
	"sync"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// testLog sends etcd's error-level logs to the test's log, where they are
// shown only with -v or when the test fails, and drops whatever comes
// after the cluster is closed: a goroutine still winding down must not log
// to a finished test, which panics.
type testLog struct {
	logf func(...any) // nil: discard

	mu      sync.Mutex
	stopped bool
}

func (l *testLog) logger() *zap.Logger {
	enc := zap.NewDevelopmentEncoderConfig()
	enc.TimeKey = "" // the test log has its own order; times are noise
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(l), zap.ErrorLevel)
	return zap.New(quietCore{core})
}

// quietCore drops errors that etcd logs in normal operation, which would
// bury a real one: each listener of a member being closed reports that it
// was closed, and a new member that checks its storage version before its
// first backend commit (it retries) reports the term missing.
type quietCore struct{ zapcore.Core }

var benign = []struct{ msg, err string }{
	{"setting up serving from embedded etcd failed.", "closed"},
	{"failed to update storage version", "missing term information"},
}

func (c quietCore) With(fs []zapcore.Field) zapcore.Core { return quietCore{c.Core.With(fs)} }

func (c quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c quietCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	for _, b := range benign {
		if e.Message != b.msg {
			continue
		}
		for _, f := range fs {
			if err, ok := f.Interface.(error); ok && f.Key == "error" && strings.Contains(err.Error(), b.err) {
				return nil
			}
		}
	}
	return c.Core.Write(e, fs)
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped && l.logf != nil {
		l.logf(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (l *testLog) stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
}
