/*
Copyright 2026 The projection-recovery Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package controllers

import (
	"sync/atomic"

	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

// capturedLogs records every log line of the test binary, at debug level,
// while a test has switched it on: the suite's logger tees into it. Off, it
// costs one atomic load per log call and keeps nothing.
var capturedLogs = &logCapture{}

type logCapture struct {
	on  atomic.Bool
	buf testenv.SyncBuffer
}

func (l *logCapture) Write(p []byte) (int, error) { return l.buf.Write(p) }

func (l *logCapture) Sync() error { return nil }

// core is a debug-level JSON core writing to the capture while it is on.
func (l *logCapture) core() zapcore.Core {
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{MessageKey: "msg", LevelKey: "level", NameKey: "logger",
		EncodeLevel: zapcore.LowercaseLevelEncoder, EncodeDuration: zapcore.StringDurationEncoder})
	return zapcore.NewCore(enc, l, uberzap.LevelEnablerFunc(func(lvl zapcore.Level) bool {
		// controller-runtime's zap maps logr V(n) to level -n: accept all.
		return l.on.Load()
	}))
}

// start clears the capture and switches it on; stop switches it off and
// returns what was logged in between.
func (l *logCapture) start() {
	l.buf.Reset()
	l.on.Store(true)
}

func (l *logCapture) stop() string {
	l.on.Store(false)
	return l.buf.String()
}
