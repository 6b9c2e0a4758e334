// Command gpufleet-checkpoint-agent is the sidecar that answers
// `kubectl gang-drain` checkpoint-and-yield requests for a trainer through
// files in a shared directory (docs/checkpoint-and-yield.md).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint/agent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := agent.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
