package main

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/clankie/clankie/config"
)

// newLogger builds the process logger: JSON by default, console for people.
func newLogger(c config.Log) (*zap.Logger, error) {
	var zc zap.Config
	if c.Format == "console" {
		zc = zap.NewDevelopmentConfig()
		zc.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
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
	return zc.Build()
}
