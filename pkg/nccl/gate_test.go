package nccl

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestGate(t *testing.T) {
	base := &Baseline{Pool: "h100-a", BusBW: 370, SizeBytes: DefaultGateSize}
	cases := []struct {
		name     string
		file     string
		baseline *Baseline
		ranks    int
		want     Verdict
		reason   string
	}{
		{"healthy", "allreduce-text.txt", base, 16, VerdictPass, ""},
		{"within tolerance", "allreduce-text.txt", &Baseline{BusBW: 400, SizeBytes: DefaultGateSize}, 16, VerdictPass, ""},
		{"below baseline", "allreduce-slow.txt", base, 16, VerdictFail, "below the baseline 370.0 GB/s by 32.4%"},
		{"wrong elements fail at any bandwidth", "allreduce-wrong.txt", base, 16, VerdictFail, "12 wrong element(s)"},
		{"out of bounds", "allreduce-wrong.txt", base, 16, VerdictFail, "1 out-of-bounds value(s)"},
		{"no baseline warns", "allreduce-text.txt", nil, 16, VerdictWarn, "no baseline stored"},
		{"rank count", "allreduce-text.txt", base, 24, VerdictFail, "16 ranks ran, want 24"},
		{"N/A is not wrong", "allreduce-na.txt", base, 16, VerdictPass, ""},
		{"legacy", "allreduce-legacy.txt", &Baseline{BusBW: 300}, 16, VerdictPass, ""},
		{"json", "allreduce-report.json.txt", base, 16, VerdictPass, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := ParseString(readFixture(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			g := Gate(GateInput{Result: res, Baseline: tc.baseline, Tolerance: 0.1, ExpectedRanks: tc.ranks})
			if g.Verdict != tc.want {
				t.Fatalf("verdict %s, want %s (%v)", g.Verdict, tc.want, g.Reasons)
			}
			if tc.reason != "" && !strings.Contains(strings.Join(g.Reasons, "; "), tc.reason) {
				t.Errorf("reasons %q lack %q", g.Reasons, tc.reason)
			}
		})
	}
}

func TestGate_MissingSize(t *testing.T) {
	res, _ := ParseString(readFixture(t, "allreduce-text.txt"))
	g := Gate(GateInput{Result: res, SizeBytes: 16 << 30, Baseline: &Baseline{BusBW: 1}})
	if g.Verdict != VerdictFail || !strings.Contains(g.Reasons[0], "16G not in the results (largest is 8G)") {
		t.Errorf("%+v", g)
	}
	if g := Gate(GateInput{}); g.Verdict != VerdictFail {
		t.Errorf("nil result: %+v", g)
	}
}

func TestBaselineStore(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	s := BaselineStore{Client: cs, Namespace: "gpu-validate"}
	got, err := s.Get(ctx, "h100-a")
	if err != nil || got != nil {
		t.Fatalf("empty store: %v, %v", got, err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	b := Baseline{Pool: "h100-a", BusBW: 370, SizeBytes: DefaultGateSize, Nodes: 2, GPUsPerNode: 8, RecordedAt: at}
	if err := s.Save(ctx, b); err != nil {
		t.Fatal(err)
	}
	other := Baseline{Pool: "team/b200 pool", BusBW: 700, SizeBytes: DefaultGateSize, RecordedAt: at}
	if err := s.Save(ctx, other); err != nil {
		t.Fatal(err)
	}
	got, err = s.Get(ctx, "h100-a")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&b, got); d != "" {
		t.Error(d)
	}
	cm, _ := cs.CoreV1().ConfigMaps("gpu-validate").Get(ctx, BaselineConfigMap, metav1GetOptions)
	if len(cm.Data) != 2 || cm.Data["team_b200_pool.json"] == "" {
		t.Errorf("data keys %v", cm.Data)
	}
	if s := got.Summary(); !strings.Contains(s, "370.0 GB/s at 8G, 2 nodes") {
		t.Error(s)
	}
}

var metav1GetOptions = metav1.GetOptions{}
