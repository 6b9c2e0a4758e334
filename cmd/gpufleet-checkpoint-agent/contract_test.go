package main

import (
	"testing"

	"github.com/gpufleet/upgrade-plugins/pkg/cli/contracttest"
)

// TestBadInput runs the agent, as main builds it, through the suite's bad
// inputs (plugins/contract runs the six plugins).
func TestBadInput(t *testing.T) {
	contracttest.Run(t, newCmd, nil, nil)
}
