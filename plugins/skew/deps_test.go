package skew

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// TestListClientAsksForProtobuf checks that against a real server the node
// list asks for protobuf first.
func TestListClientAsksForProtobuf(t *testing.T) {
	var mu sync.Mutex
	var accept string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		accept = r.Header.Get("Accept")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"NodeList","apiVersion":"v1","metadata":{},"items":[]}`))
	}))
	defer srv.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: " + srv.URL + "}\nusers:\n- name: u\n  user: {token: x}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	cg := cli.NewClientGetter(streams, ConfigOptions)
	cmd := &cobra.Command{Use: "x"}
	cli.BindFlags(cg, cmd)
	if err := cmd.ParseFlags([]string{"--kubeconfig", kc}); err != nil {
		t.Fatal(err)
	}
	c, err := listClient(cg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.HasPrefix(accept, "application/vnd.kubernetes.protobuf") {
		t.Errorf("Accept = %q, want protobuf first", accept)
	}
}
