//go:build linux

package harness

import "github.com/gpufleet/upgrade-plugins/pkg/localcluster"

// The harness node that runs pod commands (Linux only).
type (
	ExecNode        = localcluster.ExecNode
	ExecNodeOptions = localcluster.ExecNodeOptions
	Execution       = localcluster.Execution
)
