package eviction

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// fakeAPI serves nodes, pods and PDBs over HTTP the way kube-apiserver
// does: paged lists, and watch-list streams that end with the
// initial-events-end bookmark. watchMode says how it answers a watch.
type fakeAPI struct {
	t         *testing.T
	pods      int
	watchMode string // "stream", "forbidden", "cut" (closes before the bookmark)
	mu        sync.Mutex
	calls     map[string]int
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	kind := "list"
	if q.Get("watch") == "true" {
		kind = "watch"
	}
	f.mu.Lock()
	f.calls[kind+" "+r.URL.Path]++
	f.mu.Unlock()
	var items []any
	listKind, apiVersion := "", "v1"
	switch r.URL.Path {
	case "/api/v1/nodes":
		listKind = "NodeList"
		items = append(items, corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}})
	case "/api/v1/pods":
		listKind = "PodList"
		for i := range f.pods {
			items = append(items, corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%03d", i), Namespace: "ml"}, Spec: corev1.PodSpec{NodeName: "gpu-1"}})
		}
	case "/apis/policy/v1/poddisruptionbudgets":
		listKind, apiVersion = "PodDisruptionBudgetList", "policy/v1"
		items = append(items, policyv1.PodDisruptionBudget{TypeMeta: metav1.TypeMeta{Kind: "PodDisruptionBudget", APIVersion: "policy/v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ml"}})
	default:
		f.t.Errorf("unexpected request %s", r.URL)
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if kind == "watch" {
		if q.Get("sendInitialEvents") != "true" || q.Get("resourceVersionMatch") != "NotOlderThan" {
			f.t.Errorf("watch without watch-list options: %s", r.URL)
		}
		if f.watchMode == "forbidden" {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"cannot watch"}`)
			return
		}
		enc := json.NewEncoder(w)
		for i, it := range items {
			if f.watchMode == "cut" && i == len(items)/2 {
				return
			}
			_ = enc.Encode(map[string]any{"type": "ADDED", "object": it})
		}
		if f.watchMode == "cut" && len(items) == 1 {
			return
		}
		_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": map[string]any{"kind": "Pod", "apiVersion": "v1",
			"metadata": map[string]any{"resourceVersion": "10", "annotations": map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}})
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a watch stays open until the client stops it
		return
	}
	limit := len(items)
	if l := q.Get("limit"); l != "" {
		fmt.Sscan(l, &limit)
	}
	start := 0
	if c := q.Get("continue"); c != "" {
		fmt.Sscan(c, &start)
	}
	end := min(start+limit, len(items))
	cont := ""
	if end < len(items) {
		cont = fmt.Sprint(end)
	}
	list := map[string]any{"kind": listKind, "apiVersion": apiVersion, "metadata": map[string]any{"continue": cont, "resourceVersion": "10"}, "items": items[start:end]}
	_ = json.NewEncoder(w).Encode(list)
}

func TestLoadStreams(t *testing.T) {
	for _, tc := range []struct {
		mode          string
		lists, stream int
	}{
		{mode: "stream", lists: 0, stream: 3},
		// A role without watch: the first refusal turns streaming off.
		{mode: "forbidden", lists: 1 + 3 + 1, stream: 1},
		// Streams cut short are read again in pages, without duplicates.
		{mode: "cut", lists: 1 + 3 + 1, stream: 3},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			api := &fakeAPI{t: t, pods: 25, watchMode: tc.mode, calls: map[string]int{}}
			srv := httptest.NewServer(api)
			defer srv.Close()
			c, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
			if err != nil {
				t.Fatal(err)
			}
			s, err := Load(context.Background(), c, LoadOptions{Stream: true, PageSize: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Nodes) != 1 || len(s.Pods) != 25 || len(s.PDBs) != 1 {
				t.Fatalf("nodes %d pods %d pdbs %d", len(s.Nodes), len(s.Pods), len(s.PDBs))
			}
			seen := map[string]bool{}
			for _, p := range s.Pods {
				if seen[p.Name] {
					t.Errorf("pod %s read twice", p.Name)
				}
				seen[p.Name] = true
			}
			if s.ListCalls != tc.lists || (tc.mode != "forbidden" && s.StreamCalls != tc.stream) {
				t.Errorf("%d list and %d stream calls, want %d and %d (%v)", s.ListCalls, s.StreamCalls, tc.lists, tc.stream, api.calls)
			}
			if tc.mode == "forbidden" && s.StreamCalls > 3 {
				t.Errorf("%d stream calls after the first refusal", s.StreamCalls)
			}
			if tc.mode == "stream" && strings.Contains(fmt.Sprint(api.calls), "list ") {
				t.Errorf("listed although the stream worked: %v", api.calls)
			}
		})
	}
}
