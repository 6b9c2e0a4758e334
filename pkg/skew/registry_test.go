package skew

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func TestLatestPatches(t *testing.T) {
	got := LatestPatches([]string{"v1.37.0", "v1.37.2", "v1.37.3-rc.0", "v1.36.10", "v1.36.9", "1.35.1", "latest", "v1.36.11+x", "sha256-abc.sig"})
	want := map[string]Version{"1.37": MustParseVersion("v1.37.2"), "1.36": MustParseVersion("v1.36.10")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestPatchCurrencyInProcessRegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, tag := range []string{"v1.36.3", "v1.37.0", "v1.37.1", "v1.37.4", "v1.38.0-alpha.1"} {
		ref, err := name.ParseReference(host+"/kube-apiserver:"+tag, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, empty.Image); err != nil {
			t.Fatal(err)
		}
	}
	inv := Inventory{Server: ServerVersion{GitVersion: "v1.37.2"},
		Components: []Component{comp(KindKubeProxy, "daemonset/kube-proxy", "v1.36.1"), {Name: KindScheduler, State: StateNotVisible}},
		Pools:      []Pool{pool("a", "v1.35.0")}}
	got, err := PatchCurrency(context.Background(), inv, RemoteTagLister(true), host)
	if err != nil {
		t.Fatal(err)
	}
	want := []PatchReport{
		{Component: KindAPIServer, Instance: "/version", Version: "v1.37.2", Latest: "v1.37.4", PatchesBehind: 2},
		{Component: KindKubelet, Instance: "pool a", Version: "v1.35.0"},
		{Component: KindKubeProxy, Instance: "daemonset/kube-proxy", Version: "v1.36.1", Latest: "v1.36.3", PatchesBehind: 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if _, err := PatchCurrency(context.Background(), inv, RemoteTagLister(true), "127.0.0.1:1"); err == nil {
		t.Error("unreachable registry: want an error")
	}
}
