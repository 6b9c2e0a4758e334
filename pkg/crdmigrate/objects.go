package crdmigrate

import (
	"context"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	sigsjson "sigs.k8s.io/json"
)

// RawObject is one listed object: the JSON the apiserver sent, and the
// three metadata fields the rewrite needs.
type RawObject struct {
	Namespace, Name, ResourceVersion string
	JSON                             []byte
}

// Ref is namespace/name, or the name of a cluster-scoped object.
func (o *RawObject) Ref() string { return objectRef(o.Namespace, o.Name) }

func objectRef(ns, name string) string {
	if ns != "" {
		return ns + "/" + name
	}
	return name
}

// RawPage is one page of a list.
type RawPage struct {
	Items     []RawObject
	Continue  string
	Remaining *int64
}

// Objects lists and updates the objects of a custom resource. The rewrite
// sends every object back exactly as it was listed, so it never needs the
// object decoded: RESTObjects passes the listed bytes through, which keeps
// the client's cost per object to a fraction of decoding every object into
// a map and encoding it again (kubectl crd-migrate is often run from a
// laptop, but its CPU competes with the apiserver's wherever both share a
// machine).
type Objects interface {
	List(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (*RawPage, error)
	// Update writes obj as it was listed, with its resourceVersion as the
	// precondition, and returns the resourceVersion of the result.
	Update(ctx context.Context, gvr schema.GroupVersionResource, obj *RawObject, fieldManager string) (string, error)
}

// RESTObjects is Objects over a REST client of the apiserver.
type RESTObjects struct {
	Client rest.Interface
}

// NewRESTObjects returns RESTObjects for cfg, speaking JSON (custom
// resources have no protobuf encoding) and sharing cfg's rate limiter.
func NewRESTObjects(cfg *rest.Config) (*RESTObjects, error) {
	c := rest.CopyConfig(cfg)
	c.ContentType, c.AcceptContentTypes = "application/json", "application/json"
	c.GroupVersion = nil
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return &RESTObjects{Client: rc}, nil
}

func segments(gvr schema.GroupVersionResource, ns, name string) []string {
	s := make([]string, 0, 7)
	if gvr.Group == "" {
		s = append(s, "api", gvr.Version)
	} else {
		s = append(s, "apis", gvr.Group, gvr.Version)
	}
	if ns != "" {
		s = append(s, "namespaces", ns)
	}
	s = append(s, gvr.Resource)
	if name != "" {
		s = append(s, name)
	}
	return s
}

// raw returns the body of a response, or its error as the apiserver's
// Status (Result.Raw alone would give only a generic error for the code,
// losing a webhook's message or a conflict's details).
func raw(res rest.Result) ([]byte, error) {
	if err := res.Error(); err != nil {
		return nil, err
	}
	return res.Raw()
}

// List reads one page across all namespaces.
func (r *RESTObjects) List(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (*RawPage, error) {
	req := r.Client.Get().AbsPath(segments(gvr, "", "")...)
	if opts.Limit > 0 {
		req = req.Param("limit", strconv.FormatInt(opts.Limit, 10))
	}
	if opts.Continue != "" {
		req = req.Param("continue", opts.Continue)
	}
	body, err := raw(req.Do(ctx))
	if err != nil {
		return nil, err
	}
	return decodeRawList(body)
}

// rawItem keeps an item's bytes and reads its metadata.
type rawItem RawObject

func (it *rawItem) UnmarshalJSON(b []byte) error {
	var m struct {
		Metadata struct {
			Namespace       string `json:"namespace"`
			Name            string `json:"name"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(b, &m); err != nil {
		return err
	}
	it.Namespace, it.Name, it.ResourceVersion = m.Metadata.Namespace, m.Metadata.Name, m.Metadata.ResourceVersion
	it.JSON = append([]byte(nil), b...)
	return nil
}

func decodeRawList(body []byte) (*RawPage, error) {
	var l struct {
		Metadata struct {
			Continue           string `json:"continue"`
			RemainingItemCount *int64 `json:"remainingItemCount"`
		} `json:"metadata"`
		Items []rawItem `json:"items"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &l); err != nil {
		return nil, fmt.Errorf("decoding the list: %w", err)
	}
	p := &RawPage{Items: make([]RawObject, len(l.Items)), Continue: l.Metadata.Continue, Remaining: l.Metadata.RemainingItemCount}
	for i := range l.Items {
		if l.Items[i].Name == "" {
			return nil, fmt.Errorf("decoding the list: item %d has no name", i)
		}
		p.Items[i] = RawObject(l.Items[i])
	}
	return p, nil
}

// Update PUTs the listed bytes back.
func (r *RESTObjects) Update(ctx context.Context, gvr schema.GroupVersionResource, obj *RawObject, fieldManager string) (string, error) {
	req := r.Client.Put().AbsPath(segments(gvr, obj.Namespace, obj.Name)...).Body(obj.JSON)
	if fieldManager != "" {
		req = req.Param("fieldManager", fieldManager)
	}
	body, err := raw(req.Do(ctx))
	if err != nil {
		return "", err
	}
	var m struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &m); err != nil {
		return "", fmt.Errorf("decoding the updated object: %w", err)
	}
	return m.Metadata.ResourceVersion, nil
}

// DynamicObjects is Objects over a dynamic client, for clients that give
// no REST access (the fakes of unit tests); it decodes and encodes every
// object.
type DynamicObjects struct {
	Client dynamic.Interface
}

// List reads one page across all namespaces.
func (d DynamicObjects) List(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (*RawPage, error) {
	l, err := d.Client.Resource(gvr).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	p := &RawPage{Items: make([]RawObject, len(l.Items)), Continue: l.GetContinue(), Remaining: l.GetRemainingItemCount()}
	for i := range l.Items {
		b, err := l.Items[i].MarshalJSON()
		if err != nil {
			return nil, err
		}
		p.Items[i] = RawObject{Namespace: l.Items[i].GetNamespace(), Name: l.Items[i].GetName(), ResourceVersion: l.Items[i].GetResourceVersion(), JSON: b}
	}
	return p, nil
}

// Update writes obj back.
func (d DynamicObjects) Update(ctx context.Context, gvr schema.GroupVersionResource, obj *RawObject, fieldManager string) (string, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(obj.JSON); err != nil {
		return "", err
	}
	ri := d.Client.Resource(gvr)
	var res dynamic.ResourceInterface = ri
	if obj.Namespace != "" {
		res = ri.Namespace(obj.Namespace)
	}
	out, err := res.Update(ctx, u, metav1.UpdateOptions{FieldManager: fieldManager})
	if err != nil {
		return "", err
	}
	return out.GetResourceVersion(), nil
}
