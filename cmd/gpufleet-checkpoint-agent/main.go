// Command gpufleet-checkpoint-agent is the sidecar that answers
// `kubectl gang-drain` checkpoint-and-yield requests for a trainer through
// files in a shared directory (docs/checkpoint-and-yield.md).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	code := cli.Run(ctx, newCmd(streams), streams)
	stop()
	os.Exit(code)
}
