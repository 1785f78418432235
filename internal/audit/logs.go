package audit

import "github.com/go-logr/logr"

// MaxLogVerbosity is the highest verbosity the manager logs at. From 8 up, client-go
// logs the bodies of the manager's API requests and responses: every Session it writes
// (messages, replies, context) and every Secret it reads. A higher --zap-log-level
// logs as 7 does.
const MaxLogVerbosity = 7

// CapVerbosity is l with every line above verbosity max dropped, and reported as
// disabled, so that a library asking logger.V(8).Enabled() before it formats a
// request body skips the work as well as the line. Use the result in place of l,
// not beside it: they share l's sink.
func CapVerbosity(l logr.Logger, max int) logr.Logger {
	if l.GetSink() == nil {
		return l
	}
	return logr.New(&cappedSink{sink: l.GetSink(), max: max})
}

// cappedSink passes to sink the lines at or below verbosity max.
type cappedSink struct {
	sink logr.LogSink
	max  int
}

var (
	_ logr.LogSink          = (*cappedSink)(nil)
	_ logr.CallDepthLogSink = (*cappedSink)(nil)
)

// Init passes info on: the sink, already initialized by its own logger, adds its
// call depth again, which counts the frame the cap adds, so lines still name their
// caller.
func (s *cappedSink) Init(info logr.RuntimeInfo) { s.sink.Init(info) }

func (s *cappedSink) Enabled(level int) bool { return level <= s.max && s.sink.Enabled(level) }

func (s *cappedSink) Info(level int, msg string, keysAndValues ...any) {
	if level <= s.max {
		s.sink.Info(level, msg, keysAndValues...)
	}
}

func (s *cappedSink) Error(err error, msg string, keysAndValues ...any) {
	s.sink.Error(err, msg, keysAndValues...)
}

func (s *cappedSink) WithValues(keysAndValues ...any) logr.LogSink {
	return &cappedSink{sink: s.sink.WithValues(keysAndValues...), max: s.max}
}

func (s *cappedSink) WithName(name string) logr.LogSink {
	return &cappedSink{sink: s.sink.WithName(name), max: s.max}
}

func (s *cappedSink) WithCallDepth(depth int) logr.LogSink {
	if d, ok := s.sink.(logr.CallDepthLogSink); ok {
		return &cappedSink{sink: d.WithCallDepth(depth), max: s.max}
	}
	return s
}
