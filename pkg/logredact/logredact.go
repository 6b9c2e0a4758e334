// Package logredact keeps request and response bodies out of the plugins'
// -v logs. client-go logs every body it sends or receives at -v=8 and above
// (1 KiB at 8, 10 KiB at 9, all of it at 10), so a high -v would print
// Secret data, Helm release records, pod environment variables and the
// objects crd-migrate rewrites. The plugins are pasted into tickets and
// chat at -v=9 when something goes wrong; the bodies are replaced by their
// size, while URLs, status codes, headers and timings still appear.
//
// The same logger keeps client-go's error lines about requests the command
// cancelled itself (context.Canceled) out of stderr below -v=4: when one of
// several reads fails, the others are cut short, and client-go logs each of
// those before the command prints its one-line error.
package logredact

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"
)

// Withheld is the text that stands in for a body in the log.
const Withheld = "withheld: gpufleet plugins never log request or response bodies, they can hold Secret data"

// bodyMessages are the messages client-go logs bodies under
// (k8s.io/client-go/rest logBody).
var bodyMessages = map[string]bool{"Request Body": true, "Response Body": true}

// Context returns ctx carrying a logger that writes through klog (so -v
// still decides what is logged) with every body withheld. client-go takes
// its logger from the request's context, so every request made with the
// returned context, or one derived from it, is covered.
func Context(ctx context.Context) context.Context {
	return klog.NewContext(ctx, Logger(klog.Background()))
}

// Logger wraps l so that bodies are withheld.
func Logger(l klog.Logger) klog.Logger {
	inner := l.GetSink()
	if inner == nil {
		return l
	}
	// One more frame (ours) between the caller and the real sink.
	if cd, ok := inner.(callDepther); ok {
		inner = cd.WithCallDepth(1)
	}
	return l.WithSink(sink{inner})
}

type callDepther interface {
	WithCallDepth(depth int) klog.LogSink
}

type sink struct{ klog.LogSink }

func (s sink) Info(level int, msg string, kv ...any) {
	if bodyMessages[msg] {
		kv = withhold(kv)
	}
	s.LogSink.Info(level, msg, kv...)
}

// quietBelow is the -v from which cancelled requests are logged.
const quietBelow = 4

func (s sink) Error(err error, msg string, kv ...any) {
	if errors.Is(err, context.Canceled) && !s.LogSink.Enabled(quietBelow) {
		return
	}
	if bodyMessages[msg] {
		kv = withhold(kv)
	}
	s.LogSink.Error(err, msg, kv...)
}

func (s sink) WithValues(kv ...any) klog.LogSink { return sink{s.LogSink.WithValues(kv...)} }
func (s sink) WithName(name string) klog.LogSink { return sink{s.LogSink.WithName(name)} }

func (s sink) WithCallDepth(depth int) klog.LogSink {
	if cd, ok := s.LogSink.(callDepther); ok {
		return sink{cd.WithCallDepth(depth)}
	}
	return s
}

// withhold replaces the value of every "body" key, and of any value that
// is not a plain string key, by its size.
func withhold(kv []any) []any {
	out := make([]any, len(kv))
	copy(out, kv)
	for i := 1; i < len(out); i += 2 {
		if k, ok := out[i-1].(string); ok && k != "body" {
			continue
		}
		out[i] = fmt.Sprintf("[%d bytes %s]", size(out[i]), Withheld)
	}
	if len(out)%2 == 1 { // a dangling value
		out[len(out)-1] = fmt.Sprintf("[%d bytes %s]", size(out[len(out)-1]), Withheld)
	}
	return out
}

func size(v any) int {
	switch b := v.(type) {
	case string:
		return len(b)
	case []byte:
		return len(b)
	default:
		return len(fmt.Sprint(v))
	}
}
