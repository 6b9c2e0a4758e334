//go:build e2e && linux

package skewe2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
)

const probeLabel = "gpufleet.dev/probe-app"

// hostIP is an IPv4 address of this machine other than loopback: the exec
// node reports it as its pods' IP, since Endpoints refuse loopback
// addresses and the apiserver's service proxy reaches pods through them.
func hostIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("no IPv4 address other than loopback on this machine: a Service cannot reach the exec node's pods")
	return ""
}

func probeObjects(t *testing.T, cp *harness.ControlPlane, ns string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: probeLabel})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		out = append(out, "pod/"+p.Name)
	}
	svcs, err := cp.Client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: probeLabel})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs.Items {
		out = append(out, "service/"+s.Name)
	}
	return out
}

// shippedRole reads the ClusterRole of deploy/rbac/NAME.yaml.
func shippedRole(t *testing.T, name string) *rbacv1.ClusterRole {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy", "rbac", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---") {
		var cr rbacv1.ClusterRole
		if err := yaml.UnmarshalStrict([]byte(doc), &cr); err != nil {
			t.Fatalf("deploy/rbac/%s.yaml: %v", name, err)
		}
		if cr.Kind == "ClusterRole" {
			return &cr
		}
	}
	t.Fatalf("deploy/rbac/%s.yaml: no ClusterRole", name)
	return nil
}

// skewAs runs kubectl-skew with the credentials of kubeconfig.
func skewAs(t *testing.T, cp *harness.ControlPlane, kubeconfig string, args ...string) plugintest.Result {
	t.Helper()
	path := filepath.Dir(cp.Binaries.Kubectl) + string(os.PathListSeparator) + os.Getenv("PATH")
	return plugintest.RunCmd(t, plugintest.Binary(t, "kubectl-skew"), plugintest.Cmd{
		Args: append([]string{"--kubeconfig", kubeconfig}, args...),
		Env:  []string{"PATH=" + path},
	})
}

func gateOf(t *testing.T, r plugintest.Result, name string) gateRow {
	t.Helper()
	var rep preflightReport
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r)
	}
	for _, g := range rep.Items {
		if g.Name == name {
			return g
		}
	}
	t.Fatalf("no gate %s\n%s", name, r)
	return gateRow{}
}

// On a cluster of KWOK nodes only, no node can run the probe app: the gate
// is UNKNOWN, says why, and creates nothing.
func TestSyntheticAppKwokOnly(t *testing.T) {
	cp := scenario(t)
	g, _, r := preflight(t, cp, "synthetic-app", "--target", "v1.37", "--synthetic-app")
	if g.Status != "unknown" || !strings.Contains(g.Message, "no node can run the probe app") || !evidenceHas(g, "KWOK fake node", "kwok.x-k8s.io/node=fake") {
		t.Fatalf("KWOK nodes only: want UNKNOWN naming the fake nodes, got %s %q %q\n%s", g.Status, g.Message, g.Evidence, r)
	}
	if left := probeObjects(t, cp, "default"); len(left) != 0 {
		t.Fatalf("created on a cluster that cannot run it: %v", left)
	}
	// The dry run still sends both objects, stores nothing, and is WARN.
	g, _, r = preflight(t, cp, "synthetic-app", "--target", "v1.37", "--synthetic-app-dry-run")
	if g.Status != "warn" || !strings.Contains(g.Message, "dry run") || !evidenceHas(g, "a real run would be UNKNOWN") {
		t.Fatalf("dry run: got %s %q %q\n%s", g.Status, g.Message, g.Evidence, r)
	}
	if left := probeObjects(t, cp, "default"); len(left) != 0 {
		t.Fatalf("a dry run stored %v", left)
	}
}

// A control plane with an exec node, whose pods run as processes of this
// machine: the probe app (python3's http.server standing in for the
// image's server) answers through the apiserver's service proxy (PASS,
// and what an interrupted run left is deleted first); verify with a
// probe that runs and never listens is a FAIL; everything is deleted
// after each run, and after a run interrupted with SIGINT. As a user with skew.yaml and skew-synthetic-app.yaml
// bound, it passes; without each rule of the latter it is UNKNOWN naming
// the verb and resource.
func TestSyntheticAppExecNode(t *testing.T) {
	ip := hostIP(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cp, err := harness.Start(ctx, harness.Options{StartTimeout: 6 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	node, err := cp.StartExecNode(ctx, harness.ExecNodeOptions{Name: "probe-exec", PodIP: ip, Dir: filepath.Join(t.TempDir(), "pods")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)

	// What an interrupted run left: a labelled pod (bound to a node that
	// does not exist, so nothing runs it) and Service.
	lbl := map[string]string{probeLabel: "old"}
	if _, err := cp.Client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gpufleet-probe-app-old", Labels: lbl},
		Spec: corev1.PodSpec{NodeName: "gone", Containers: []corev1.Container{{Name: "main", Image: "x"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "gpufleet-probe-app-old", Labels: lbl},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	port := freePort(t)
	serve := fmt.Sprintf("python3 -m http.server %d --bind %s", port, ip)
	flags := []string{"--synthetic-app-command", serve, "--synthetic-app-port", strconv.Itoa(port), "--synthetic-app-timeout", "60s"}
	dir := t.TempDir()
	baseline := filepath.Join(dir, "baseline.yaml")
	r := skew(t, cp, append([]string{"preflight", "-o", "json", "--target", "v1.37", "--save", baseline}, flags...)...)
	g := gateOf(t, r, "synthetic-app")
	if g.Status != "ok" || !strings.Contains(g.Message, "probe-exec answered GET /api/v1/namespaces/default/services/gpufleet-probe-app-") ||
		!evidenceHas(g, "earlier run left behind", "pod/gpufleet-probe-app-old", "service/gpufleet-probe-app-old") {
		t.Fatalf("exec node: want PASS through the service proxy, the old run's objects deleted; got %s %q %q\n%s", g.Status, g.Message, g.Evidence, r)
	}
	if left := probeObjects(t, cp, "default"); len(left) != 0 {
		t.Fatalf("left behind after PASS: %v", left)
	}

	// A probe that runs and never listens: verify against the passing
	// baseline fails, naming the node and the proxy path.
	v := skew(t, cp, "verify", "-o", "json", "--baseline", baseline, "--synthetic-app-command", "sleep 600", "--synthetic-app-port", strconv.Itoa(port), "--synthetic-app-timeout", "15s")
	var vr struct {
		Items []struct{ Kind, Status, Object, Message string }
	}
	if err := json.Unmarshal([]byte(v.Stdout), &vr); err != nil {
		t.Fatalf("%v\n%s", err, v)
	}
	found := false
	for _, it := range vr.Items {
		if it.Kind == "synthetic-app" && it.Status == "fail" && it.Object == "node/probe-exec" && strings.Contains(it.Message, "did not answer") {
			found = true
		}
	}
	if v.ExitCode != 1 || !found {
		t.Fatalf("a probe that does not answer: want exit 1 and a synthetic-app FAIL, got exit %d\n%s", v.ExitCode, v)
	}
	if left := probeObjects(t, cp, "default"); len(left) != 0 {
		t.Fatalf("left behind after FAIL: %v", left)
	}
	// verify with no flag runs it as the baseline did: PASS, no item.
	v = skew(t, cp, "verify", "-o", "json", "--baseline", baseline)
	if strings.Contains(v.Stdout, `"synthetic-app"`) {
		t.Fatalf("verify as the baseline ran it: want no synthetic-app item\n%s", v)
	}

	// An interrupt (SIGINT, as Ctrl-C sends) while the probe is deployed:
	// the run still deletes its pod and Service before it exits.
	cmd := exec.Command(plugintest.Binary(t, "kubectl-skew"), "--kubeconfig", cp.Kubeconfig, "preflight", "-o", "json", "--target", "v1.37",
		"--synthetic-app-command", "sleep 600", "--synthetic-app-port", strconv.Itoa(port), "--synthetic-app-timeout", "60s")
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(cp.Binaries.Kubectl)+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := harness.Eventually(ctx, "the probe pod running", time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := cp.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: probeLabel})
		return err == nil && len(pods.Items) == 1 && pods.Items[0].Status.Phase == corev1.PodRunning, nil
	}); err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("%v\n%s", err, out.String())
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if left := probeObjects(t, cp, "default"); len(left) != 0 {
		t.Fatalf("left behind after an interrupt: %v\n%s", left, out.String())
	}

	// RBAC: skew.yaml's read-only role and the synthetic-app role, bound
	// in default.
	base := shippedRole(t, "skew")
	app := shippedRole(t, "skew-synthetic-app")
	user := "synthetic-app-user"
	kc, err := cp.UserKubeconfig(user)
	if err != nil {
		t.Fatal(err)
	}
	bind := func(t *testing.T, role *rbacv1.ClusterRole, namespaced bool) {
		t.Helper()
		if _, err := cp.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}
		subj := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
		if namespaced {
			if _, err := cp.Client.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name}, RoleRef: ref, Subjects: subj}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = cp.Client.RbacV1().RoleBindings("default").Delete(context.Background(), role.Name, metav1.DeleteOptions{})
			})
		} else {
			if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name}, RoleRef: ref, Subjects: subj}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = cp.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
			})
		}
		t.Cleanup(func() {
			_ = cp.Client.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
		})
	}
	bind(t, base.DeepCopy(), false)
	args := append([]string{"preflight", "-o", "json", "--target", "v1.37"}, flags...)
	// Without the first rule the first verb refused is list services
	// (skew.yaml already lists pods everywhere).
	wants := []string{"forbidden: cannot list services", "forbidden: cannot get services/proxy"}
	if len(app.Rules) != len(wants) {
		t.Fatalf("%d rules in deploy/rbac/skew-synthetic-app.yaml, %d removal cases: every rule needs one", len(app.Rules), len(wants))
	}
	for i := range app.Rules {
		t.Run(fmt.Sprintf("without-rule-%d", i), func(t *testing.T) {
			role := app.DeepCopy()
			role.Name = fmt.Sprintf("%s-no-%d", app.Name, i)
			role.Rules = append(append([]rbacv1.PolicyRule{}, app.Rules[:i]...), app.Rules[i+1:]...)
			bind(t, role, true)
			g := gateOf(t, skewAs(t, cp, kc, args...), "synthetic-app")
			if g.Status != "unknown" || !strings.Contains(g.Message, wants[i]) {
				t.Fatalf("without %v: want UNKNOWN %q, got %s %q", app.Rules[i], wants[i], g.Status, g.Message)
			}
		})
	}
	full := app.DeepCopy()
	bind(t, full, true)
	if g := gateOf(t, skewAs(t, cp, kc, args...), "synthetic-app"); g.Status != "ok" {
		t.Fatalf("with the shipped roles: want PASS, got %s %q %q", g.Status, g.Message, g.Evidence)
	}
	if left := probeObjects(t, cp, "default"); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}
