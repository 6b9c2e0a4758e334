// Command kubectl-pdb_blockers is the kubectl plugin `kubectl pdb-blockers`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/plugins/pdbblockers"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	code := cli.Run(ctx, pdbblockers.NewCmd(cli.NewClientGetter(streams, pdbblockers.ConfigOptions), streams), streams)
	stop()
	os.Exit(code)
}
