package crdmigrate

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// The items are written as an apiserver would not (keys out of order, odd
// spacing, a large integer) so that any decode and encode would show.
const (
	namespacedItem = `{"spec":{"size":9007199254740993,"a":[1, 2]},"kind":"Widget","apiVersion":"example.gpufleet.dev/v2","metadata":{"resourceVersion":"41","namespace":"ml","name":"w-1"}}`
	clusterItem    = `{"apiVersion":"example.gpufleet.dev/v2","kind":"Widget","metadata":{"name":"c-1","resourceVersion":"42"}}`
)

func TestRESTObjects(t *testing.T) {
	type put struct{ path, query, body string }
	var puts []put
	var lists []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.Method {
		case http.MethodGet:
			lists = append(lists, r.URL.Path+"?"+r.URL.RawQuery)
			_, _ = io.WriteString(w, `{"kind":"WidgetList","apiVersion":"example.gpufleet.dev/v2","metadata":{"continue":"tok","remainingItemCount":7},"items":[`+namespacedItem+`,`+clusterItem+`]}`)
		case http.MethodPut:
			b, _ := io.ReadAll(r.Body)
			puts = append(puts, put{r.URL.Path, r.URL.RawQuery, string(b)})
			if strings.HasSuffix(r.URL.Path, "/c-1") {
				w.WriteHeader(http.StatusConflict)
				_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Operation cannot be fulfilled on widgets.example.gpufleet.dev \"c-1\": the object has been modified","reason":"Conflict","details":{"name":"c-1","group":"example.gpufleet.dev","kind":"widgets"},"code":409}`)
				return
			}
			_, _ = io.WriteString(w, `{"apiVersion":"example.gpufleet.dev/v2","kind":"Widget","metadata":{"name":"w-1","namespace":"ml","resourceVersion":"77"},"spec":{}}`)
		}
	}))
	defer hs.Close()
	objs, err := NewRESTObjects(&rest.Config{Host: hs.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	gvr := schema.GroupVersionResource{Group: testGroup, Version: "v2", Resource: "widgets"}
	p, err := objs.List(ctx, gvr, metav1.ListOptions{Limit: 500, Continue: "prev"})
	if err != nil {
		t.Fatal(err)
	}
	seven := int64(7)
	want := &RawPage{Continue: "tok", Remaining: &seven, Items: []RawObject{
		{Namespace: "ml", Name: "w-1", ResourceVersion: "41", JSON: []byte(namespacedItem)},
		{Name: "c-1", ResourceVersion: "42", JSON: []byte(clusterItem)},
	}}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("page (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/apis/example.gpufleet.dev/v2/widgets?continue=prev&limit=500"}, lists); diff != "" {
		t.Errorf("list requests (-want +got):\n%s", diff)
	}

	rv, err := objs.Update(ctx, gvr, &p.Items[0], ManagedBy)
	if err != nil || rv != "77" {
		t.Errorf("update = %q, %v; want the new resourceVersion 77", rv, err)
	}
	_, err = objs.Update(ctx, gvr, &p.Items[1], ManagedBy)
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "the object has been modified") {
		t.Errorf("update of c-1 = %v; want the apiserver's Conflict", err)
	}
	// The bytes go back exactly as listed, to the object's own URL.
	wantPuts := []put{
		{"/apis/example.gpufleet.dev/v2/namespaces/ml/widgets/w-1", "fieldManager=" + ManagedBy, namespacedItem},
		{"/apis/example.gpufleet.dev/v2/widgets/c-1", "fieldManager=" + ManagedBy, clusterItem},
	}
	if diff := cmp.Diff(wantPuts, puts, cmp.AllowUnexported(put{})); diff != "" {
		t.Errorf("updates (-want +got):\n%s", diff)
	}
}

func TestDecodeRawList_Bad(t *testing.T) {
	for _, body := range []string{
		`{"items":[`,
		`{"items":{}}`,
		`{"items":[{"metadata":{"namespace":"ml"}}]}`,
		`{"items":[{"metadata":{"Name":"w-1"}}]}`, // field names are case-sensitive
	} {
		if p, err := decodeRawList([]byte(body)); err == nil {
			t.Errorf("decodeRawList(%s) = %+v, want an error", body, p)
		}
	}
}
