package gpuvalidate

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

func runContexts(t *testing.T, per map[string]*fake.Clientset, args ...string) (string, string, int) {
	t.Helper()
	cg := cli.NewTestClientGetter()
	cg.Meta.Context = "a"
	cg.PerContext = map[string]*cli.TestClientGetter{}
	for name, kube := range per {
		g := cli.NewTestClientGetter().WithKube(kube).WithDynamic(dyn())
		g.Meta.Context = name
		if kube == nil {
			g.Err = errors.New("dial tcp 10.0.0.9:443: connect: connection refused")
		}
		cg.PerContext[name] = g
	}
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := NewCmd(cg, streams)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), cli.ExitCode(err)
}

func TestNodes_Contexts(t *testing.T) {
	configzFixture(t, nil, false)
	per := map[string]*fake.Clientset{
		"a": fake.NewClientset(node("gpu-0", "h100", "v1.37.2", 8, 8)),
		"b": fake.NewClientset(node("gpu-0", "h100", "v1.37.2", 7, 7)),
	}
	out, errOut, code := runContexts(t, per, "nodes", "gpu-0", "--expected-gpus", "8", "--config-drift=false", "--contexts", "a,b", "--color", "never")
	if code != cli.ExitFindings {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"CONTEXT   NODE", "a         gpu-0   h100   v1.37.2   8/8    OK", "b         gpu-0   h100   v1.37.2   7/8    FAIL"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}

	// EKS context names (the cluster ARN) and provider node names: both
	// stay whole, as kubectl config get-contexts and kubectl get nodes
	// print them; the pool, kubelet and GPU columns give way first, and a
	// table of the two names and the status alone runs past 120 columns.
	arn := "arn:aws:eks:us-east-1:123456789012:cluster/gpu-prod-h100-training"
	name := "ip-10-42-117-203.us-east-1.compute.internal"
	long := map[string]*fake.Clientset{arn: fake.NewClientset(node(name, "h100-c", "v1.37.2", 7, 7))}
	out, _, _ = runContexts(t, long, "nodes", name, "--expected-gpus", "8", "--config-drift=false", "--contexts", arn, "--color", "never")
	if !strings.Contains(out, arn+"   "+name+"   FAIL") || !strings.HasPrefix(out, "CONTEXT") || strings.Contains(out, "h100-c") {
		t.Errorf("want the context and the node whole, then the status, the other columns dropped:\n%s", out)
	}
	wide, _, _ := runContexts(t, long, "nodes", name, "--expected-gpus", "8", "--config-drift=false", "--contexts", arn, "--color", "never", "-o", "wide")
	if !strings.Contains(wide, arn) || strings.Contains(wide, cli.ElisionMark) {
		t.Errorf("-o wide keeps the context whole:\n%s", wide)
	}

	out, _, code = runContexts(t, per, "nodes", "gpu-0", "--expected-gpus", "8", "--config-drift=false", "--all-contexts", "-o", "json")
	var list struct {
		Kind  string
		Items []struct {
			Context  string
			ExitCode int
			Error    string
			Report   struct {
				Metadata struct{ Context string }
				Items    []struct{ Status string }
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err, out)
	}
	golden(t, "contexts.json.golden", out)
	if code != cli.ExitFindings || list.Kind != "GPUValidateReportList" || len(list.Items) != 2 ||
		list.Items[0].Context != "a" || list.Items[0].ExitCode != cli.ExitOK || list.Items[0].Report.Metadata.Context != "a" ||
		list.Items[1].ExitCode != cli.ExitFindings || list.Items[1].Report.Items[0].Status != "fail" {
		t.Errorf("exit %d\n%s", code, out)
	}

	// An unreachable context is reported and does not stop the others.
	per["gone"] = nil
	out, errOut, code = runContexts(t, per, "nodes", "gpu-0", "--expected-gpus", "8", "--config-drift=false", "--contexts", "a,b,gone", "-o", "json")
	if code == cli.ExitOK || code == cli.ExitFindings || !strings.Contains(errOut, "context gone") || !strings.Contains(out, `"context": "b"`) {
		t.Errorf("exit %d\n%s\n%s", code, out, errOut)
	}

	for _, args := range [][]string{
		{"nodes", "gpu-0", "--contexts", "a", "--all-contexts"},
		{"nodes", "gpu-0", "--contexts", "nope"},
		{"nccl", "gpu-0", "--image", "x", "--contexts", "a"},
	} {
		if _, errOut, code := runContexts(t, per, args...); code != cli.ExitUsage {
			t.Errorf("%v: exit %d (%s)", args, code, errOut)
		}
	}
}
