package fleetrun

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// TestRecordEnd: each Workflow end is a new record, read back oldest
// first; a phase Argo never gives is a usage error that writes nothing.
func TestRecordEnd(t *testing.T) {
	ctx := context.Background()
	f := loadFleet(t, nil)
	plan := mustPlan(t, f, infos(f, nil), monday0930)
	plan.Run = "r1"
	st := tempStore(t)
	now := monday0930
	p := &Programme{Store: st, Plan: plan, Now: func() time.Time { return now }}
	if _, err := p.RecordEnd(ctx, "gpu-prod-r1", "Failed"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour)
	if _, err := p.RecordEnd(ctx, "gpu-prod-r1", "Succeeded"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][2]string{{"gpu-prod-r1", "Running"}, {"gpu-prod-r1", ""}, {"", "Succeeded"}} {
		_, err := p.RecordEnd(ctx, bad[0], bad[1])
		if cli.ExitCode(err) != cli.ExitUsage || strings.Contains(err.Error(), "\n") {
			t.Errorf("RecordEnd(%q, %q) = %v, want a one-line usage error", bad[0], bad[1], err)
		}
	}
	ends, err := ReadEnds(ctx, st, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(ends) != 2 || ends[0].Phase != "Failed" || ends[1].Phase != "Succeeded" || ends[1].Workflow != "gpu-prod-r1" || !ends[1].At.Equal(monday0930.Add(time.Hour)) {
		t.Errorf("ends %+v", ends)
	}
}
