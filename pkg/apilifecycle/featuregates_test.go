package apilifecycle

import (
	"strings"
	"testing"
)

func TestDefaultFeatureGates(t *testing.T) {
	fg := DefaultFeatureGates()
	if fg.DataDate == "" || !strings.Contains(fg.Source, "kubernetes/kubernetes") || len(fg.Tags) < 2 || len(fg.Gates) < 100 {
		t.Fatalf("embedded data: %s %s %v, %d gates", fg.DataDate, fg.Source, fg.Tags, len(fg.Gates))
	}
	g, ok := fg.Removed("DevicePluginCDIDevices")
	if !ok || g.RemovedIn != R(1, 34) || g.LastStage != "GA" {
		t.Errorf("DevicePluginCDIDevices: %+v %v", g, ok)
	}
	if _, ok := fg.RemovedBetween("DevicePluginCDIDevices", R(1, 32), R(1, 33)); ok {
		t.Error("removed between 1.32 and 1.33")
	}
	if _, ok := fg.RemovedBetween("DevicePluginCDIDevices", R(1, 33), R(1, 37)); !ok {
		t.Error("not removed between 1.33 and 1.37")
	}
	// The flag's name, not the Go constant's: CPUCFSQuotaPeriod is
	// "CustomCPUCFSQuotaPeriod", declared in every release compared.
	for _, name := range []string{"CPUCFSQuotaPeriod", "CustomCPUCFSQuotaPeriod"} {
		if g, ok := fg.Removed(name); ok {
			t.Errorf("%s listed as removed: %+v", name, g)
		}
	}
}

func TestParseFeatureGatesErrors(t *testing.T) {
	for _, in := range []string{"dataDate: x\nsource: s\ngates: []\n", "dataDate: \"2026-01-01\"\ngates: []\n",
		"dataDate: \"2026-01-01\"\nsource: s\ngates: [{name: A}]\n", "dataDate: \"2026-01-01\"\nsource: s\ngates: [{name: A, removedIn: \"1.3\"}, {name: A, removedIn: \"1.4\"}]\n",
		"dataDate: \"2026-01-01\"\nsource: s\nextra: 1\ngates: []\n"} {
		if _, err := ParseFeatureGates([]byte(in)); err == nil {
			t.Errorf("%q parses", in)
		}
	}
}
