// Command kubectl-deprecations is the kubectl plugin `kubectl deprecations`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/plugins/deprecations"
)

// profileEnv names a file to write a CPU profile of the whole run to (after
// package initialisation, which `go tool pprof` cannot see; measure that
// with `kubectl deprecations version`). For the speed work of `make bench`.
const profileEnv = "KUBECTL_DEPRECATIONS_CPUPROFILE"

func main() {
	stopProfile := func() {}
	if p := os.Getenv(profileEnv); p != "" {
		f, err := os.Create(p)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "warning: %s: %v\n", profileEnv, err)
		} else {
			stopProfile = func() { pprof.StopCPUProfile(); _ = f.Close() }
		}
	}
	code := run()
	stopProfile()
	os.Exit(code)
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	return cli.Run(ctx, deprecations.NewCmd(cli.NewClientGetter(streams, deprecations.ConfigOptions), streams), streams)
}
