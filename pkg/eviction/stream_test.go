package eviction

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
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
	if kind == "watch" && strings.HasPrefix(f.watchMode, "proto") && r.URL.Path == "/api/v1/pods" {
		f.protoWatch(w, items)
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

// protoWatch answers a pods watch-list request in protobuf, as
// kube-apiserver does for a client that accepts it: "proto" sends every pod
// and the bookmark, "proto-cut" stops halfway, "proto-error" sends an
// ERROR event (410 Expired) after the first pod.
func (f *fakeAPI) protoWatch(w http.ResponseWriter, items []any) {
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	enc := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
	w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
	frame := func(typ string, obj runtime.Object) {
		raw, err := runtime.Encode(enc, obj)
		if err != nil {
			f.t.Error(err)
		}
		ev := metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}}
		b, err := ev.Marshal()
		if err != nil {
			f.t.Error(err)
		}
		_ = binary.Write(w, binary.BigEndian, uint32(len(b)))
		_, _ = w.Write(b)
	}
	for i, it := range items {
		if f.watchMode == "proto-cut" && i == len(items)/2 {
			return
		}
		if f.watchMode == "proto-error" && i == 1 {
			st := apierrors.NewResourceExpired("too old resource version").Status()
			frame("ERROR", &st)
			return
		}
		p := it.(corev1.Pod)
		frame("ADDED", &p)
	}
	frame("BOOKMARK", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "10", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
}

// TestLoadStreamsProtobuf: pods streamed in protobuf are decoded straight
// into their slim form, equal to Slim of the pods sent; a stream cut short
// is read again in pages, and an ERROR event is the server's error.
func TestLoadStreamsProtobuf(t *testing.T) {
	for _, mode := range []string{"proto", "proto-cut", "proto-error"} {
		t.Run(mode, func(t *testing.T) {
			api := &fakeAPI{t: t, pods: 25, watchMode: mode, calls: map[string]int{}}
			srv := httptest.NewServer(api)
			defer srv.Close()
			c, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{
				ContentType: runtime.ContentTypeProtobuf, AcceptContentTypes: runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON}})
			if err != nil {
				t.Fatal(err)
			}
			s, err := Load(context.Background(), c, LoadOptions{Stream: true, PageSize: 10, KeepPods: "ml"})
			if mode == "proto-error" {
				if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
					t.Fatalf("error %v, want the server's 410 Expired", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Pods) != 25 {
				t.Fatalf("%d pods", len(s.Pods))
			}
			// KeepPods: the whole pods too, once, even when a cut stream
			// was read again in pages.
			if len(s.KeptPods) != 25 || s.KeptPods[24].Name != "p-024" || s.KeptPods[0].Spec.NodeName != "gpu-1" {
				t.Errorf("%d kept pods", len(s.KeptPods))
			}
			for i, p := range s.Pods {
				want := Slim(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%03d", i), Namespace: "ml"}, Spec: corev1.PodSpec{NodeName: "gpu-1"}})
				if diff := cmp.Diff(want, p); diff != "" {
					t.Errorf("pod %d (-want +got):\n%s", i, diff)
				}
			}
			wantLists := 0
			if mode == "proto-cut" {
				wantLists = 3 // 25 pods in pages of 10
			}
			if s.ListCalls != wantLists || s.StreamCalls != 3 {
				t.Errorf("%d list and %d stream calls, want %d and 3 (%v)", s.ListCalls, s.StreamCalls, wantLists, api.calls)
			}
		})
	}
}
