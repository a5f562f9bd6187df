package main

import (
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/clankie/clankie/config"
)

// newLogger builds the process logger: JSON by default, console for people,
// on stderr. Its first line is the build (version, revision, Go), so every
// log says what wrote it.
func newLogger(c config.Log) (*zap.Logger, error) {
	var zc zap.Config
	if c.Format == "console" {
		zc = zap.NewDevelopmentConfig()
		zc.EncoderConfig.EncodeLevel = zapcore.CapitalLevelEncoder
		if isTerminal(os.Stderr) {
			// Colour only for a person at a terminal: in a file or a
			// pipe the escape codes are noise.
			zc.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
		}
		zc.Development = false
	} else {
		zc = zap.NewProductionConfig()
		zc.EncoderConfig.TimeKey = "time"
		zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	}
	lvl, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, err
	}
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.DisableStacktrace = true // a stack trace can carry argument values
	zc.Sampling = nil           // receipts are never sampled away
	log, err := zc.Build()
	if err != nil {
		return nil, err
	}
	logBuild(log)
	return log, nil
}

// logBuild writes the build as a process's first log line, whatever the
// level: a warn-level log still says which binary wrote it.
func logBuild(log *zap.Logger) {
	if ce := log.Check(zapcore.InfoLevel, "clankie starting"); ce != nil {
		ce.Write(readBuildInfo().fields()...)
		return
	}
	// Below the configured level: write it through a core that accepts it.
	log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return forceCore{c} })).
		Info("clankie starting", readBuildInfo().fields()...)
}

// forceCore writes every entry its inner core would encode, whatever the
// level, for the one build line.
type forceCore struct{ zapcore.Core }

func (f forceCore) Enabled(zapcore.Level) bool { return true }
func (f forceCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, f)
}
func (f forceCore) With(fs []zapcore.Field) zapcore.Core { return forceCore{f.Core.With(fs)} }

// isTerminal reports whether f is a character device (a terminal), without
// a dependency: a file or a pipe is not.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
