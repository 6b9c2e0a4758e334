package crdmigrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

const (
	testGroup = "example.gpufleet.dev"
	testCRD   = "widgets." + testGroup
	testNS    = "ml"
)

var widgets = schema.GroupVersionResource{Group: testGroup, Version: "v2", Resource: "widgets"}

// testCRDObj returns a two-version CRD at storage v2 with the given
// storedVersions.
func testCRDObj(stored ...string) *apiextv1.CustomResourceDefinition {
	return &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: testCRD, UID: "uid-1", Generation: 3, ResourceVersion: "10"},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: testGroup, Scope: apiextv1.NamespaceScoped,
			Names: apiextv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Deprecated: true},
				{Name: "v2", Served: true, Storage: true},
			},
			Conversion: &apiextv1.CustomResourceConversion{Strategy: apiextv1.NoneConverter},
		},
		Status: apiextv1.CustomResourceDefinitionStatus{StoredVersions: stored},
	}
}

// widgetServer fakes the apiserver's handling of widgets: objects remember
// the version they are stored at; an update re-encodes at v2 and bumps the
// resourceVersion only when that changes the stored bytes (as
// GuaranteedUpdate does). Lists page by index ("c:<n>" tokens).
type widgetServer struct {
	mu      sync.Mutex
	objs    map[string]*unstructured.Unstructured // name -> object
	stored  map[string]string                     // name -> stored version
	rv      int64
	lists   []string // continue tokens asked for, in order
	updates []string
	// failUpdate, when set, may fail an update (called with the lock held).
	failUpdate func(name string, attempt int) error
	attempts   map[string]int
	// failList may fail a list with the given token.
	failList func(cont string) error
}

func newWidgetServer(n int, storedAt func(i int) string) *widgetServer {
	s := &widgetServer{objs: map[string]*unstructured.Unstructured{}, stored: map[string]string{}, attempts: map[string]int{}, rv: 100}
	for i := range n {
		name := fmt.Sprintf("w-%05d", i)
		s.rv++
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": testGroup + "/v2", "kind": "Widget",
			"metadata": map[string]any{"name": name, "namespace": testNS, "resourceVersion": strconv.FormatInt(s.rv, 10)},
		}}
		s.objs[name] = u
		s.stored[name] = storedAt(i)
	}
	return s
}

func (s *widgetServer) names() []string {
	out := make([]string, 0, len(s.objs))
	for n := range s.objs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (s *widgetServer) storedCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, v := range s.stored {
		out[v]++
	}
	return out
}

// list serves one page (the dynamic fake drops Limit and Continue from
// list actions, so widgets bypass it).
func (s *widgetServer) list(opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cont := opts.Continue
	s.lists = append(s.lists, cont)
	if s.failList != nil {
		if err := s.failList(cont); err != nil {
			return nil, err
		}
	}
	start := 0
	if cont != "" {
		start, _ = strconv.Atoi(strings.TrimPrefix(cont, "c:"))
	}
	names := s.names()
	end := len(names)
	if opts.Limit > 0 && start+int(opts.Limit) < end {
		end = start + int(opts.Limit)
	}
	l := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": testGroup + "/v2", "kind": "WidgetList"}}
	for _, n := range names[min(start, len(names)):end] {
		l.Items = append(l.Items, *s.objs[n].DeepCopy())
	}
	if end < len(names) {
		l.SetContinue("c:" + strconv.Itoa(end))
		rem := int64(len(names) - end)
		l.SetRemainingItemCount(&rem)
	}
	return l, nil
}

func (s *widgetServer) update(obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := obj.GetName()
	s.attempts[name]++
	if s.failUpdate != nil {
		if err := s.failUpdate(name, s.attempts[name]); err != nil {
			return nil, err
		}
	}
	cur, ok := s.objs[name]
	if !ok {
		return nil, apierrors.NewNotFound(widgets.GroupResource(), name)
	}
	if cur.GetResourceVersion() != obj.GetResourceVersion() {
		return nil, apierrors.NewConflict(widgets.GroupResource(), name, fmt.Errorf("the object has been modified"))
	}
	if len(opts.DryRun) > 0 {
		return cur.DeepCopy(), nil
	}
	s.updates = append(s.updates, name)
	if s.stored[name] != "v2" {
		s.stored[name] = "v2"
		s.rv++
		cur.SetResourceVersion(strconv.FormatInt(s.rv, 10))
	}
	return cur.DeepCopy(), nil
}

// ServeHTTP serves the widget list and update requests of RESTObjects as
// the apiserver does, errors as Status objects. It sets no Retry-After
// header (client-go would wait it out itself); the delay still reaches
// Retry through the Status details.
func (s *widgetServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const list = "/apis/" + testGroup + "/v2/widgets"
	const one = "/apis/" + testGroup + "/v2/namespaces/" + testNS + "/widgets/"
	var (
		out runtime.Object
		err error
	)
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == list:
		limit, _ := strconv.ParseInt(q.Get("limit"), 10, 64)
		out, err = s.list(metav1.ListOptions{Limit: limit, Continue: q.Get("continue")})
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, one):
		body, _ := io.ReadAll(r.Body)
		u := &unstructured.Unstructured{}
		if err = u.UnmarshalJSON(body); err == nil && u.GetName() != strings.TrimPrefix(r.URL.Path, one) {
			err = apierrors.NewBadRequest("the name of the object does not match the name on the URL")
		}
		if err == nil {
			out, err = s.update(u, metav1.UpdateOptions{FieldManager: q.Get("fieldManager")})
		}
	default:
		err = apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path)
	}
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		st := apierrors.APIStatus(nil)
		if !errors.As(err, &st) {
			st = apierrors.NewInternalError(err)
		}
		status := st.Status()
		status.Kind, status.APIVersion = "Status", "v1"
		w.WriteHeader(int(status.Code))
		_ = json.NewEncoder(w).Encode(&status)
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

// widgetDynamic routes widgets to a widgetServer and everything else to
// the dynamic fake.
type widgetDynamic struct {
	dynamic.Interface
	srv *widgetServer
}

func (d widgetDynamic) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	if gvr.Resource == "widgets" && d.srv != nil {
		return &widgetResource{NamespaceableResourceInterface: d.Interface.Resource(gvr), srv: d.srv}
	}
	return d.Interface.Resource(gvr)
}

type widgetResource struct {
	dynamic.NamespaceableResourceInterface
	srv *widgetServer
}

func (r *widgetResource) Namespace(string) dynamic.ResourceInterface { return r }

func (r *widgetResource) List(_ context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return r.srv.list(opts)
}

func (r *widgetResource) Update(_ context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions, _ ...string) (*unstructured.Unstructured, error) {
	return r.srv.update(obj, opts)
}

// env is a fake cluster for one test.
type env struct {
	ext  *apiextfake.Clientset
	kube *kubefake.Clientset
	dyn  *dynamicfake.FakeDynamicClient
	srv  *widgetServer
	c    Clients
}

// The ways the rewrite loop can reach the widgets: through the dynamic
// client (the fakes' way), and as raw JSON over HTTP (RESTObjects, what
// the plugin uses against a cluster).
const (
	viaDynamic = "dynamic"
	viaREST    = "rest"
)

var objectPaths = []string{viaDynamic, viaREST}

// newEnvVia is newEnv whose widgets are reached via (viaDynamic or viaREST).
func newEnvVia(t *testing.T, via string, crd *apiextv1.CustomResourceDefinition, srv *widgetServer) *env {
	t.Helper()
	e := newEnv(crd, srv)
	if via == viaREST {
		hs := httptest.NewServer(srv)
		t.Cleanup(hs.Close)
		objs, err := NewRESTObjects(&rest.Config{Host: hs.URL, QPS: -1})
		if err != nil {
			t.Fatal(err)
		}
		e.c.Objects = objs
	}
	return e
}

func newEnv(crd *apiextv1.CustomResourceDefinition, srv *widgetServer, kubeObjs ...runtime.Object) *env {
	e := &env{ext: apiextfake.NewSimpleClientset(crd), kube: kubefake.NewClientset(kubeObjs...), srv: srv}
	scheme := runtime.NewScheme()
	e.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		widgets: "WidgetList",
		{Group: testGroup, Version: "v1", Resource: "widgets"}: "WidgetList",
		SVMResource("v1"):      "StorageVersionMigrationList",
		SVMResource("v1beta1"): "StorageVersionMigrationList",
	})
	installConfigMapVersions(e.kube)
	e.c = Clients{Ext: e.ext, Kube: e.kube, Dynamic: widgetDynamic{Interface: e.dyn, srv: srv}}
	return e
}

// installConfigMapVersions makes the fake give ConfigMaps resource versions
// and enforce them on update and delete, as the apiserver does.
func installConfigMapVersions(k *kubefake.Clientset) {
	var mu sync.Mutex
	rv := 0
	k.PrependReactor("create", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		rv++
		a.(k8stesting.CreateAction).GetObject().(metav1.Object).SetResourceVersion(strconv.Itoa(rv))
		return false, nil, nil
	})
	k.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		obj := a.(k8stesting.UpdateAction).GetObject().(metav1.Object)
		cur, err := k.Tracker().Get(a.GetResource(), a.GetNamespace(), obj.GetName())
		if err != nil {
			return true, nil, err
		}
		if cur.(metav1.Object).GetResourceVersion() != obj.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), obj.GetName(), fmt.Errorf("modified"))
		}
		rv++
		obj.SetResourceVersion(strconv.Itoa(rv))
		return false, nil, nil
	})
}

func (e *env) storedVersions() []string {
	crd, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), testCRD, metav1.GetOptions{})
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	return crd.Status.StoredVersions
}

// statusUpdates counts UpdateStatus calls on CRDs.
func (e *env) statusUpdates() int {
	n := 0
	for _, a := range e.ext.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

func (e *env) store() *CheckpointStore {
	return &CheckpointStore{Client: e.kube, Namespace: "kube-system", Now: func() time.Time { return t0 }}
}

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// noSleep records waits instead of sleeping.
type noSleep struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (n *noSleep) sleep(ctx context.Context, d time.Duration) error {
	n.mu.Lock()
	n.waits = append(n.waits, d)
	n.mu.Unlock()
	return ctx.Err()
}
