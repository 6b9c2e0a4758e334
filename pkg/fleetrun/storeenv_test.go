package fleetrun

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// resetStoreEnv forgets what LiftStoreEnv set (the variables themselves
// are t.Setenv's to restore).
func resetStoreEnv(t *testing.T) {
	t.Helper()
	storeEnv.Lock()
	storeEnv.lifted = nil
	storeEnv.Unlock()
	t.Cleanup(func() {
		storeEnv.Lock()
		storeEnv.lifted = nil
		storeEnv.Unlock()
	})
}

// TestStoreKeysStayOutOfCommands: the store's credentials, which a step
// pod gets under StoreEnvPrefix, reach the store's client (opening an s3://
// store lifts them to their own names) and never a command the step
// starts: the command sees neither the prefixed names nor the lifted
// ones, and a name the pod already had keeps its own value there.
func TestStoreKeysStayOutOfCommands(t *testing.T) {
	envBin, err := exec.LookPath("env")
	if err != nil {
		t.Skip("no env binary")
	}
	resetStoreEnv(t)
	t.Setenv(StoreEnvPrefix+"AWS_ACCESS_KEY_ID", "STOREKEYID")
	t.Setenv(StoreEnvPrefix+"AWS_SECRET_ACCESS_KEY", "store-secret")
	// The pod's own identity for the cloud CLI an action runs.
	t.Setenv("AWS_ACCESS_KEY_ID", "PODKEYID")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	if err := os.Unsetenv("AWS_SECRET_ACCESS_KEY"); err != nil {
		t.Fatal(err)
	}
	st, err := OpenStore(context.Background(), "s3://fleet/runs?region=us-east-1&endpoint=http://127.0.0.1:1&use_path_style=true")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := os.Getenv("AWS_SECRET_ACCESS_KEY") + "/" + os.Getenv("AWS_ACCESS_KEY_ID"); got != "store-secret/STOREKEYID" {
		t.Errorf("after opening the store, this process has %s, want the store's store-secret/STOREKEYID", got)
	}
	var out, errOut bytes.Buffer
	ex, err := ExecPlugins{}.Run(context.Background(), []string{envBin}, []string{"KUBECONFIG=/tmp/c.kubeconfig"}, &out, &errOut)
	if err != nil || ex.Code != 0 {
		t.Fatalf("env: %v %+v %s", err, ex, errOut.String())
	}
	env := out.String()
	for _, leak := range []string{"store-secret", "STOREKEYID", StoreEnvPrefix} {
		if strings.Contains(env, leak) {
			t.Errorf("a command's environment holds %q:\n%s", leak, env)
		}
	}
	for _, want := range []string{"\nAWS_ACCESS_KEY_ID=PODKEYID\n", "\nKUBECONFIG=/tmp/c.kubeconfig\n"} {
		if !strings.Contains("\n"+env, want) {
			t.Errorf("a command's environment lacks %q:\n%s", strings.TrimSpace(want), env)
		}
	}
	if strings.Contains(env, "AWS_SECRET_ACCESS_KEY=") {
		t.Errorf("AWS_SECRET_ACCESS_KEY, unset in the pod, reaches the command:\n%s", env)
	}
}

// TestRenderPrefixesStoreKeys: the store Secret reaches each step pod
// under StoreEnvPrefix, which the step lifts for itself alone.
func TestRenderPrefixesStoreKeys(t *testing.T) {
	_, r := mustRender(t, func(f *fleetfile.Fleet) {
		withSecrets(f)
		f.Spec.Engine.Argo.StoreSecret = "fleet-store"
	})
	n := 0
	for _, o := range renderedObjects(t, r.YAML) {
		tmpls, _, _ := unstructured.NestedSlice(o.Object, "spec", "templates")
		for _, x := range tmpls {
			c, ok := x.(map[string]any)["container"].(map[string]any)
			if !ok {
				continue
			}
			n++
			from, _, _ := unstructured.NestedSlice(c, "envFrom")
			if len(from) != 1 {
				t.Fatalf("%s: envFrom %v", o.GetName(), from)
			}
			e := from[0].(map[string]any)
			name, _, _ := unstructured.NestedString(e, "secretRef", "name")
			if e["prefix"] != StoreEnvPrefix || name != "fleet-store" {
				t.Errorf("%s: envFrom %v, want secret fleet-store under prefix %s", o.GetName(), e, StoreEnvPrefix)
			}
		}
	}
	if n == 0 {
		t.Fatal("no container rendered")
	}
}
