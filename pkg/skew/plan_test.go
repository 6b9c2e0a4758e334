package skew

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type poolSummary struct {
	Upgrades             string
	MustUpgradeBefore    string
	Every                int
	NodeDisruptionsSaved int
	NoSlack              bool
	Status               Status
}

func summarisePools(p Plan) map[string]poolSummary {
	out := map[string]poolSummary{}
	for _, pp := range p.Pools {
		var ups []string
		for _, u := range pp.Upgrades {
			ups = append(ups, u.From+"->"+u.To)
		}
		out[pp.Name] = poolSummary{strings.Join(ups, ","), pp.MustUpgradeBefore, pp.UpgradesEveryHop, pp.NodeDisruptionsSaved, pp.NoSlack, pp.Status}
	}
	return out
}

func phases(p Plan) []string {
	var out []string
	for _, s := range p.Steps {
		x := s.ControlPlane + " " + s.Phase
		if s.Pool != "" {
			x += " " + s.Pool
		}
		out = append(out, x)
	}
	return out
}

func TestMakePlanSkipLevel(t *testing.T) {
	// The control plane is behind: 1.34 with kubelets at 1.34 and 1.31,
	// target 1.37.
	inv := Inventory{Server: ServerVersion{GitVersion: "v1.34.3"}, Pools: []Pool{pool("train", "v1.34.3"), pool("old", "v1.31.9")}}
	p, err := MakePlan(inv, MustParseVersion("v1.37"), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantPools := map[string]poolSummary{
		"old":   {Upgrades: "1.31->1.34,1.34->1.37", MustUpgradeBefore: "1.35", Every: 4, NodeDisruptionsSaved: 4, NoSlack: true, Status: StatusEdge},
		"train": {Upgrades: "1.34->1.37", MustUpgradeBefore: "", Every: 3, NodeDisruptionsSaved: 4, NoSlack: true, Status: StatusEdge},
	}
	if diff := cmp.Diff(wantPools, summarisePools(p)); diff != "" {
		t.Errorf("pools (-want +got)\n%s", diff)
	}
	wantSteps := []string{
		"1.34 node-pool old",
		"1.35 pre-flight", "1.35 etcd-snapshot", "1.35 apiservers", "1.35 controllers", "1.35 addons",
		"1.36 pre-flight", "1.36 etcd-snapshot", "1.36 apiservers", "1.36 controllers", "1.36 addons",
		"1.37 pre-flight", "1.37 etcd-snapshot", "1.37 apiservers", "1.37 controllers", "1.37 addons",
		"1.37 node-pool old", "1.37 node-pool train",
	}
	if diff := cmp.Diff(wantSteps, phases(p)); diff != "" {
		t.Errorf("steps (-want +got)\n%s", diff)
	}
	want := PlanSummary{From: "1.34", Target: "1.37", Hops: 3, PoolUpgrades: 3, PoolUpgradesEveryHop: 7, NodeDisruptions: 6,
		NodeDisruptionsEveryHop: 14, NodeDisruptionsSaved: 8, Status: StatusEdge}
	if diff := cmp.Diff(want, p.Summary); diff != "" {
		t.Errorf("summary (-want +got)\n%s", diff)
	}
	// No apiserver instance is visible and nothing says there are several.
	if strings.Contains(strings.Join(p.Warnings, "\n"), "apiservers are mixed") {
		t.Errorf("warnings claim mixed apiservers without several instances: %q", p.Warnings)
	}
	for i, s := range p.Steps {
		if s.Number != i+1 || s.Action == "" {
			t.Errorf("step %d: %+v", i, s)
		}
	}
}

func TestMakePlanCases(t *testing.T) {
	tests := []struct {
		name    string
		inv     Inventory
		target  string
		pools   map[string]poolSummary
		hops    int
		status  Status
		wantErr string
	}{
		{
			name:   "one hop with slack",
			inv:    Inventory{Server: ServerVersion{GitVersion: "v1.36.1"}, Pools: []Pool{pool("a", "v1.36.1"), pool("b", "v1.35.0")}},
			target: "v1.37",
			hops:   1,
			pools: map[string]poolSummary{
				"a": {Upgrades: "1.36->1.37", MustUpgradeBefore: "", Every: 1, Status: StatusOK},
				"b": {Upgrades: "1.35->1.37", MustUpgradeBefore: "", Every: 1, Status: StatusOK},
			},
			status: StatusOK,
		},
		{
			name:   "pool already beyond the limit is fixed first",
			inv:    Inventory{Server: ServerVersion{GitVersion: "v1.37.2"}, Pools: []Pool{pool("x", "v1.33.0")}},
			target: "v1.37",
			hops:   0,
			pools: map[string]poolSummary{
				"x": {Upgrades: "1.33->1.37", MustUpgradeBefore: "1.37", Every: 1, Status: StatusViolation},
			},
			status: StatusViolation,
		},
		{
			name:   "kubelet below 1.25 lags two",
			inv:    Inventory{Server: ServerVersion{GitVersion: "v1.24.0"}, Pools: []Pool{pool("y", "v1.24.0")}},
			target: "v1.28",
			hops:   4,
			pools: map[string]poolSummary{
				"y": {Upgrades: "1.24->1.26,1.26->1.28", MustUpgradeBefore: "1.27", Every: 4, NodeDisruptionsSaved: 4, NoSlack: true, Status: StatusEdge},
			},
			status: StatusEdge,
		},
		{
			name:   "six hops: two drains",
			inv:    Inventory{Server: ServerVersion{GitVersion: "v1.31.0"}, Pools: []Pool{pool("z", "v1.31.0")}},
			target: "1.37",
			hops:   6,
			pools: map[string]poolSummary{
				"z": {Upgrades: "1.31->1.34,1.34->1.37", MustUpgradeBefore: "1.35", Every: 6, NodeDisruptionsSaved: 8, NoSlack: true, Status: StatusEdge},
			},
			status: StatusEdge,
		},
		{
			name:    "downgrade",
			inv:     Inventory{Server: ServerVersion{GitVersion: "v1.37.2"}},
			target:  "v1.36",
			wantErr: "downgrades are not planned",
		},
		{
			name:    "no apiserver version",
			inv:     Inventory{Server: ServerVersion{GitVersion: "?"}},
			target:  "v1.36",
			wantErr: "no parsable apiserver version",
		},
		{
			name:    "too far",
			inv:     Inventory{Server: ServerVersion{GitVersion: "v1.10.0"}},
			target:  "v1.37",
			wantErr: "at most 12 hops",
		},
		{
			name: "mixed control plane and unknown kubelets",
			inv: Inventory{Server: ServerVersion{GitVersion: "v1.36.0"}, Components: []Component{
				comp(KindAPIServer, "a", "v1.36.0"), comp(KindAPIServer, "b", "v1.35.2"),
			}, Pools: []Pool{{Name: "u", Nodes: 2, Unknown: 2}}},
			target: "v1.36",
			hops:   1,
			pools:  map[string]poolSummary{"u": {Status: StatusOK}},
			status: StatusOK,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := MakePlan(tc.inv, MustParseVersion(tc.target), PlanOptions{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.pools, summarisePools(p)); diff != "" {
				t.Errorf("pools (-want +got)\n%s", diff)
			}
			if p.Summary.Hops != tc.hops || p.Summary.Status != tc.status {
				t.Errorf("hops %d status %s, want %d %s", p.Summary.Hops, p.Summary.Status, tc.hops, tc.status)
			}
		})
	}
}
