package skew

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func pool(name string, versions ...string) Pool {
	p := Pool{Name: name, Label: "cloud.google.com/gke-nodepool"}
	for _, v := range versions {
		p.Versions = append(p.Versions, VersionCount{Version: v, Nodes: 2})
		p.Nodes += 2
	}
	return p
}

func comp(name, inst, version string) Component {
	return Component{Name: name, Instance: inst, Version: version, State: StateVisible}
}

// verdicts reduces findings to "component instance rule -> status".
func verdicts(fs []Finding) map[string]Status {
	out := map[string]Status{}
	for _, f := range fs {
		out[f.Component+" "+f.Instance+" "+f.Rule] = f.Status
	}
	return out
}

func TestKubeletMaxSkew(t *testing.T) {
	for v, want := range map[string]int{"v1.24.17": 2, "v1.25.0": 3, "v1.23.0": 2, "v1.37.2": 3, "v0.9.0": 2} {
		if got := KubeletMaxSkew(MustParseVersion(v)); got != want {
			t.Errorf("KubeletMaxSkew(%s) = %d, want %d", v, got, want)
		}
	}
}

func TestVerdict(t *testing.T) {
	tests := []struct {
		behind, maxBehind, maxAhead int
		want                        Status
	}{
		{0, 3, 0, StatusOK},
		{2, 3, 0, StatusOK},
		{3, 3, 0, StatusEdge},
		{4, 3, 0, StatusViolation},
		{-1, 3, 0, StatusViolation},
		{-1, 1, 1, StatusEdge},
		{-2, 1, 1, StatusViolation},
		{0, 0, 0, StatusOK},
	}
	for _, tc := range tests {
		if got := Verdict(tc.behind, tc.maxBehind, tc.maxAhead); got != tc.want {
			t.Errorf("Verdict(%d, %d, %d) = %s, want %s", tc.behind, tc.maxBehind, tc.maxAhead, got, tc.want)
		}
	}
}

func TestCheckRules(t *testing.T) {
	tests := []struct {
		name string
		inv  Inventory
		want map[string]Status
		sum  func(t *testing.T, s CheckSummary)
	}{
		{
			name: "kubelets three behind are at the edge, four behind violate",
			inv: Inventory{Server: ServerVersion{GitVersion: "v1.37.2"}, Pools: []Pool{
				pool("a", "v1.37.2"), pool("b", "v1.35.1"), pool("c", "v1.34.0"), pool("d", "v1.33.9"),
			}},
			want: map[string]Status{
				"kube-apiserver /version apiserver-ha": StatusOK,
				"kubelet pool a kubelet-vs-apiserver":  StatusOK,
				"kubelet pool b kubelet-vs-apiserver":  StatusOK,
				"kubelet pool c kubelet-vs-apiserver":  StatusEdge,
				"kubelet pool d kubelet-vs-apiserver":  StatusViolation,
			},
			sum: func(t *testing.T, s CheckSummary) {
				if s.MaxSkew != 4 || s.Violations != 1 || s.Edge != 1 || s.Status != StatusViolation {
					t.Errorf("summary %+v", s)
				}
				if diff := cmp.Diff([]string{"c"}, s.PoolsAtEdge); diff != "" {
					t.Errorf("pools at edge (-want +got)\n%s", diff)
				}
				if s.KubeletMin != "v1.33.9" || s.KubeletMax != "v1.37.2" || s.Nodes != 8 {
					t.Errorf("kubelet span %s..%s nodes %d", s.KubeletMin, s.KubeletMax, s.Nodes)
				}
			},
		},
		{
			name: "kubelets older than 1.25 may lag only two minors",
			inv: Inventory{Server: ServerVersion{GitVersion: "v1.26.5"}, Pools: []Pool{
				pool("old", "v1.23.17"), pool("edge", "v1.24.3"), pool("new", "v1.25.0"),
			}},
			want: map[string]Status{
				"kube-apiserver /version apiserver-ha":   StatusOK,
				"kubelet pool old kubelet-vs-apiserver":  StatusViolation,
				"kubelet pool edge kubelet-vs-apiserver": StatusEdge,
				"kubelet pool new kubelet-vs-apiserver":  StatusOK,
			},
		},
		{
			name: "kubelet newer than an apiserver violates",
			inv:  Inventory{Server: ServerVersion{GitVersion: "v1.35.0"}, Pools: []Pool{pool("a", "v1.35.0", "v1.36.1")}},
			want: map[string]Status{
				"kube-apiserver /version apiserver-ha": StatusOK,
				"kubelet pool a kubelet-vs-apiserver":  StatusViolation,
			},
		},
		{
			name: "vendor versions parse and mixed HA apiservers are at the edge",
			inv: Inventory{Server: ServerVersion{GitVersion: "v1.30.2-gke.1587003"}, Components: []Component{
				comp(KindAPIServer, "kube-apiserver-cp-0", "v1.30.2-gke.1587003"),
				comp(KindAPIServer, "kube-apiserver-cp-1", "v1.29.3-eks-ab12cd3"),
				comp(KindAPIServer, "kube-apiserver-cp-2", "v1.28.5+k3s1"),
			}},
			want: map[string]Status{
				"kube-apiserver /version apiserver-ha":            StatusOK,
				"kube-apiserver kube-apiserver-cp-0 apiserver-ha": StatusOK,
				"kube-apiserver kube-apiserver-cp-1 apiserver-ha": StatusEdge,
				"kube-apiserver kube-apiserver-cp-2 apiserver-ha": StatusViolation,
			},
		},
		{
			name: "controllers: not newer than the oldest apiserver, one minor older at most",
			inv: Inventory{Server: ServerVersion{GitVersion: "v1.33.1"}, Components: []Component{
				comp(KindAPIServer, "kube-apiserver-a", "v1.33.1"),
				comp(KindAPIServer, "kube-apiserver-b", "v1.32.4"),
				comp(KindControllerManager, "kcm-a", "v1.32.4"),
				comp(KindControllerManager, "kcm-b", "v1.33.1"),
				comp(KindScheduler, "sched-a", "v1.31.0"),
				comp(KindCloudControllerManager, "ccm", "v1.32.0-rc.1"),
			}},
			want: map[string]Status{
				"kube-apiserver /version apiserver-ha":                   StatusOK,
				"kube-apiserver kube-apiserver-a apiserver-ha":           StatusOK,
				"kube-apiserver kube-apiserver-b apiserver-ha":           StatusEdge,
				"kube-controller-manager kcm-a controllers-vs-apiserver": StatusEdge,
				"kube-controller-manager kcm-b controllers-vs-apiserver": StatusViolation,
				"kube-scheduler sched-a controllers-vs-apiserver":        StatusViolation,
				"cloud-controller-manager ccm controllers-vs-apiserver":  StatusEdge,
			},
		},
		{
			name: "kube-proxy against the apiserver and the kubelets",
			inv: Inventory{Server: ServerVersion{GitVersion: "v1.37.0"}, Components: []Component{
				comp(KindKubeProxy, "daemonset/kube-proxy", "v1.34.2"),
			}, Pools: []Pool{pool("a", "v1.37.0"), pool("b", "v1.34.0")}},
			want: map[string]Status{
				"kube-apiserver /version apiserver-ha":                    StatusOK,
				"kube-proxy daemonset/kube-proxy kube-proxy-vs-apiserver": StatusEdge,
				"kube-proxy daemonset/kube-proxy kube-proxy-vs-kubelet":   StatusEdge,
				"kubelet pool a kubelet-vs-apiserver":                     StatusOK,
				"kubelet pool b kubelet-vs-apiserver":                     StatusEdge,
			},
		},
		{
			name: "kube-proxy older than 1.25 may be two minors from a kubelet",
			inv: Inventory{Server: ServerVersion{GitVersion: "v1.26.0"}, Components: []Component{
				comp(KindKubeProxy, "daemonset/kube-proxy", "v1.24.0"),
			}, Pools: []Pool{pool("a", "v1.26.0"), pool("b", "v1.25.0")}},
			want: map[string]Status{
				"kube-apiserver /version apiserver-ha":                    StatusOK,
				"kube-proxy daemonset/kube-proxy kube-proxy-vs-apiserver": StatusEdge,
				"kube-proxy daemonset/kube-proxy kube-proxy-vs-kubelet":   StatusEdge,
				"kubelet pool a kubelet-vs-apiserver":                     StatusOK,
				"kubelet pool b kubelet-vs-apiserver":                     StatusOK,
			},
		},
		{
			name: "kubectl within one minor either way",
			inv: Inventory{Server: ServerVersion{GitVersion: "v1.35.0"}, Components: []Component{
				comp(KindKubectl, "PATH", "v1.36.0"),
			}},
			want: map[string]Status{"kube-apiserver /version apiserver-ha": StatusOK, "kubectl PATH kubectl-vs-apiserver": StatusOK},
		},
		{
			name: "kubectl two behind violates",
			inv: Inventory{Server: ServerVersion{GitVersion: "v1.35.0"}, Components: []Component{
				comp(KindKubectl, "PATH", "v1.33.0"),
			}},
			want: map[string]Status{"kube-apiserver /version apiserver-ha": StatusOK, "kubectl PATH kubectl-vs-apiserver": StatusViolation},
		},
		{
			name: "kubectl one behind is at the edge, two ahead violates",
			inv: Inventory{Server: ServerVersion{GitVersion: "v1.35.0"}, Components: []Component{
				comp(KindKubectl, "old", "v1.34.0"), comp(KindKubectl, "new", "v1.37.0"),
			}},
			want: map[string]Status{
				"kube-apiserver /version apiserver-ha": StatusOK,
				"kubectl old kubectl-vs-apiserver":     StatusEdge,
				"kubectl new kubectl-vs-apiserver":     StatusViolation,
			},
		},
		{
			name: "unknown versions, nodes without nodeInfo, invisible and forbidden components",
			inv: Inventory{Server: ServerVersion{GitVersion: "v1.37.2"}, Components: []Component{
				{Name: KindAPIServer, State: StateNotVisible, Source: "no pod"},
				{Name: KindControllerManager, State: StateForbidden, Source: "pods kube-system"},
				comp(KindScheduler, "sched", "latest"),
				comp(KindCoreDNS, "deployment/coredns", "v1.12.1"),
				{Name: KindKubectl, Instance: "PATH", State: StateAbsent, Source: "no kubectl on PATH"},
			}, Pools: []Pool{{Name: "x", Nodes: 3, Unknown: 1, UnknownNodes: []string{"x-2"}, Versions: []VersionCount{{Version: "v1.37.0", Nodes: 2}}}}},
			want: map[string]Status{
				"kube-apiserver /version apiserver-ha":          StatusOK,
				"kube-apiserver  inventory":                     StatusInfo,
				"kube-controller-manager  inventory":            StatusUnknown,
				"kube-scheduler sched controllers-vs-apiserver": StatusUnknown,
				"kubelet pool x kubelet-version-unknown":        StatusUnknown,
				"kubelet pool x kubelet-vs-apiserver":           StatusOK,
				"coredns deployment/coredns inventory":          StatusInfo,
				"kubectl PATH kubectl-vs-apiserver":             StatusInfo,
			},
		},
		{
			name: "unparsable apiserver",
			inv:  Inventory{Server: ServerVersion{GitVersion: "garbage"}, Pools: []Pool{pool("a", "v1.30.0")}},
			// The pool is still listed, UNKNOWN: its skew cannot be judged.
			want: map[string]Status{"kube-apiserver /version apiserver-ha": StatusUnknown, "kubelet pool a kubelet-vs-apiserver": StatusUnknown},
		},
		{
			name: "a saved kubelet version that does not parse is unknown in its pool",
			inv: Inventory{Server: ServerVersion{GitVersion: "v1.37.2"}, Pools: []Pool{{Name: "a", Nodes: 3,
				Versions: []VersionCount{{Version: "v1.37.2", Nodes: 2}, {Version: "garbage", Nodes: 1}}}}},
			want: map[string]Status{"kube-apiserver /version apiserver-ha": StatusOK, "kubelet pool a kubelet-vs-apiserver": StatusOK,
				"kubelet pool a kubelet-version-unknown": StatusUnknown},
		},
		{
			name: "emulation version is reported",
			inv:  Inventory{Server: ServerVersion{GitVersion: "v1.37.2", EmulationVersion: "1.36", MinCompatibilityVersion: "1.35"}},
			want: map[string]Status{"kube-apiserver /version apiserver-ha": StatusOK, "kube-apiserver /version emulation-version": StatusInfo},
		},
		{
			name: "emulating its own minor is not reported",
			inv:  Inventory{Server: ServerVersion{GitVersion: "v1.37.2", EmulationVersion: "1.37", MinCompatibilityVersion: "1.36"}},
			want: map[string]Status{"kube-apiserver /version apiserver-ha": StatusOK},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs, sum := Check(tc.inv)
			if diff := cmp.Diff(tc.want, verdicts(fs)); diff != "" {
				t.Errorf("verdicts (-want +got)\n%s", diff)
			}
			for _, f := range fs {
				if f.Message == "" {
					t.Errorf("finding %+v has no message", f)
				}
			}
			if tc.sum != nil {
				tc.sum(t, sum)
			}
		})
	}
}

func TestCheckFindingFields(t *testing.T) {
	fs, _ := Check(Inventory{Server: ServerVersion{GitVersion: "v1.37.2"}, Pools: []Pool{pool("d", "v1.33.9")}})
	want := Finding{Component: KindKubelet, Instance: "pool d", Version: "v1.33.9", Against: "v1.37.2", Skew: 4, Limit: 3,
		Rule: RuleKubelet, Status: StatusViolation, Message: "kubelet 1.33 is 4 minors behind the apiserver 1.37; the policy allows 3 (2 nodes)"}
	if diff := cmp.Diff(want, fs[1]); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}
