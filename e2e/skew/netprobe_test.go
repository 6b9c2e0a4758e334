//go:build e2e

package skewe2e

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const netProbeLabel = "gpufleet.dev/network-probe"

// --probe-network on KWOK nodes: the network-policy gate is UNKNOWN naming
// the fake nodes rather than a pass, creates no pod, and still deletes the
// namespace an interrupted run left (by its label); verify reports the
// same UNKNOWN. --probe-network-dry-run lists what a run would create and
// stores nothing.
func TestNetworkProbeKwok(t *testing.T) {
	cp := scenario(t)
	ctx := ctxT(t)
	nss := cp.Client.CoreV1().Namespaces()
	live := func() []string {
		l, err := nss.List(ctx, metav1.ListOptions{LabelSelector: netProbeLabel})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range l.Items {
			if n.DeletionTimestamp == nil {
				out = append(out, n.Name)
			}
		}
		return out
	}
	// What an interrupted run left: its namespace and a pod in it.
	const left = "gpufleet-netprobe-old01"
	if _, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: left, Labels: map[string]string{netProbeLabel: "old01"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nss.Delete(ctx, left, metav1.DeleteOptions{}) })

	// The dry run names what it would delete and create, and stores nothing.
	g, _, r := preflight(t, cp, "network-policy", "--target", "v1.37", "--probe-network-dry-run")
	if g.Status != "warn" || !strings.Contains(g.Message, "network probe: dry run") ||
		!evidenceHas(g, "would delete namespace/"+left) || !evidenceHas(g, "would create networkpolicy gpufleet-netprobe-", "gpufleet-netprobe-deny") ||
		!evidenceHas(g, "a real run would be UNKNOWN") {
		t.Fatalf("dry run: got %s %q %q\n%s", g.Status, g.Message, g.Evidence, r)
	}
	if got := live(); len(got) != 1 || got[0] != left {
		t.Fatalf("after the dry run: namespaces %v, want only %s", got, left)
	}

	baseline := t.TempDir() + "/baseline.yaml"
	g, _, r = preflight(t, cp, "network-policy", "--target", "v1.37", "--probe-network", "--save", baseline)
	if g.Status != "unknown" || !strings.Contains(g.Message, "no node can run the network probe's pods") || !strings.Contains(g.Message, "KWOK fake nodes") ||
		!evidenceHas(g, "deleted what an earlier run left behind: namespace/"+left) {
		t.Fatalf("KWOK: want UNKNOWN naming the fake nodes and the leftover deleted, got %s %q %q\n%s", g.Status, g.Message, g.Evidence, r)
	}
	if got := live(); len(got) != 0 {
		t.Fatalf("namespaces of the probe left: %v", got)
	}
	if pods, err := cp.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: netProbeLabel}); err != nil || len(pods.Items) != 0 {
		t.Fatalf("pods of the probe: %v %v", pods, err)
	}

	// verify runs it again the way the baseline did: UNKNOWN, not clean.
	v := skew(t, cp, "verify", "-o", "json", "--baseline", baseline)
	var vr struct {
		Items []struct{ Kind, Status, Object, Message string }
	}
	if err := json.Unmarshal([]byte(v.Stdout), &vr); err != nil {
		t.Fatalf("%v\n%s", err, v)
	}
	found := false
	for _, it := range vr.Items {
		if it.Kind == "network-policy" && it.Status == "unknown" && strings.Contains(it.Message, "network probe: no node can run the network probe's pods") {
			found = true
		}
	}
	if !found {
		t.Fatalf("verify: want an UNKNOWN network probe item\n%s", v)
	}
}
