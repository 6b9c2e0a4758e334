package gpucheck

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// A 403 can come from the apiserver denying the caller, or from the
// kubelet behind the proxy denying the apiserver. Only the first is
// fixed by the caller's RBAC, so the two must not be confused.
func TestConfigzForbiddenWho(t *testing.T) {
	for _, tc := range []struct {
		name        string
		contentType string
		body        string
		want        error
	}{
		{"apiserver denies the caller", "application/json",
			`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"nodes \"gpu-1\" is forbidden: User \"bob\" cannot get resource \"nodes/proxy\" in API group \"\" at the cluster scope","reason":"Forbidden","details":{"name":"gpu-1","kind":"nodes"},"code":403}`,
			ErrConfigzForbidden},
		{"kubelet refuses the apiserver", "text/plain; charset=utf-8",
			"Forbidden (user=kube-apiserver-kubelet-client, verb=get, resource=nodes, subresource=configz)",
			ErrKubeletRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/api/v1/nodes/gpu-1/proxy/configz" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(http.StatusForbidden)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			_, err = NewConfigzFetcher(kube)(context.Background(), "gpu-1")
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}
