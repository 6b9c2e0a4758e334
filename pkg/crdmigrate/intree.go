package crdmigrate

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// SVMGroup is the API group of the in-tree StorageVersionMigration.
const SVMGroup = "storagemigration.k8s.io"

// SVMVersions are the versions tried, newest first: v1 from Kubernetes
// 1.37, v1beta1 from 1.35 (feature gate StorageVersionMigrator, and the API
// enabled with --runtime-config=storagemigration.k8s.io/v1beta1=true).
var SVMVersions = []string{"v1", "v1beta1"}

// SVMResource returns the StorageVersionMigration resource at version.
func SVMResource(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: SVMGroup, Version: version, Resource: "storageversionmigrations"}
}

// DetectInTree returns the newest served StorageVersionMigration version,
// or "" when the API is not served. Whether kube-controller-manager runs the
// controller cannot be seen through the API; InTree finds out by waiting
// for it to pick the migration up.
func DetectInTree(d discovery.DiscoveryInterface) (string, error) {
	for _, v := range SVMVersions {
		rl, err := d.ServerResourcesForGroupVersion(SVMGroup + "/" + v)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("discovering %s/%s: %w", SVMGroup, v, err)
		}
		for _, r := range rl.APIResources {
			if r.Name == "storageversionmigrations" {
				return v, nil
			}
		}
	}
	return "", nil
}

// ErrNoController means a StorageVersionMigration was not picked up in
// time: the API is served but kube-controller-manager does not run the
// storage-version-migrator controller (feature gate StorageVersionMigrator
// off there, or the controller disabled with --controllers).
var ErrNoController = errors.New("the storage-version-migrator controller of kube-controller-manager did not pick up the migration")

// InTreeFailedError is a StorageVersionMigration that ended Failed.
type InTreeFailedError struct {
	CRD       string
	Migration string
	Message   string
}

func (e *InTreeFailedError) Error() string {
	return fmt.Sprintf("storageversionmigration %s for %s failed: %s", e.Migration, e.CRD, e.Message)
}

// InTree migrates a CRD through the in-tree StorageVersionMigration API:
// it creates a migration for the resource (or waits on one not finished
// yet, so a second run resumes the first), waits until it succeeds, then
// makes sure status.storedVersions holds only the storage version (the 1.37
// controller trims it itself; older ones leave it to us) and reads it back.
type InTree struct {
	Clients
	// Version is the served StorageVersionMigration version (DetectInTree).
	Version string
	// Force creates a migration even when storedVersions is already trimmed.
	Force bool
	// Poll is the status poll interval (default 1s).
	Poll time.Duration
	// AckTimeout bounds the wait for the controller to pick the migration
	// up (default 30s); then ErrNoController, and the migration created by
	// this run is deleted again.
	AckTimeout time.Duration
	// TrimWait is how long to wait for the controller to trim
	// storedVersions before doing it ourselves (default 20s).
	TrimWait time.Duration
	Retry    Retry
	Now      func() time.Time
	Sleep    func(ctx context.Context, d time.Duration) error
	// OnEvent and OnProgress are as for Migrator.
	OnEvent    func(Event)
	OnProgress func(Progress)
}

func (m *InTree) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *InTree) sleep(ctx context.Context, d time.Duration) error {
	if m.Sleep != nil {
		return m.Sleep(ctx, d)
	}
	return Sleep(ctx, d)
}

func (m *InTree) event(crd string, t EventType, format string, args ...any) {
	if m.OnEvent != nil {
		m.OnEvent(Event{CRD: crd, Type: t, Message: fmt.Sprintf(format, args...)})
	}
}

var notYet = regexp.MustCompile(`(\d+)/(\d+) objects not yet migrated`)
var verified = regexp.MustCompile(`(\d+) objects verified migrated`)

func conditionTrue(obj *unstructured.Unstructured, t string) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		if m["type"] == t && m["status"] == string(metav1.ConditionTrue) {
			msg, _ := m["message"].(string)
			return true, msg
		}
	}
	return false, ""
}

func acknowledged(obj *unstructured.Unstructured) bool {
	rv, _, _ := unstructured.NestedString(obj.Object, "status", "resourceVersion")
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	return rv != "" || len(conds) > 0
}

func terminal(obj *unstructured.Unstructured) bool {
	s, _ := conditionTrue(obj, "Succeeded")
	f, _ := conditionTrue(obj, "Failed")
	return s || f
}

// Run migrates one CRD through the in-tree API.
func (m *InTree) Run(ctx context.Context, name string) (*Result, error) {
	start := m.now()
	crd, err := m.Ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading customresourcedefinition %s: %w", name, err)
	}
	sv := StorageVersion(crd)
	res := &Result{CRD: name, Method: MethodInTree, StorageVersion: sv, StoredVersionsBefore: append([]string{}, crd.Status.StoredVersions...)}
	svms := m.Dynamic.Resource(SVMResource(m.Version))
	list, err := svms.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing storageversionmigrations: %w", err)
	}
	var svm *unstructured.Unstructured
	for i := range list.Items {
		it := &list.Items[i]
		g, _, _ := unstructured.NestedString(it.Object, "spec", "resource", "group")
		r, _, _ := unstructured.NestedString(it.Object, "spec", "resource", "resource")
		if g == crd.Spec.Group && r == crd.Spec.Names.Plural && !terminal(it) {
			svm = it
			break
		}
	}
	if svm == nil && !m.Force && !NeedsMigration(crd.Status.StoredVersions, sv) {
		res.NothingToDo = true
		res.StoredVersionsAfter = res.StoredVersionsBefore
		m.event(name, EventNothing, "%s: storedVersions is already [%s]; nothing to do", name, sv)
		return res, nil
	}
	created := false
	if svm != nil {
		res.Resumed = true
		m.event(name, EventResumed, "%s: waiting on storageversionmigration %s, still running", name, svm.GetName())
	} else {
		prefix := "crd-migrate-" + crd.Spec.Names.Plural
		if len(prefix) > 200 {
			prefix = prefix[:200]
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": SVMGroup + "/" + m.Version,
			"kind":       "StorageVersionMigration",
			"metadata": map[string]any{
				"generateName": strings.TrimRight(prefix, "-.") + "-",
				"labels":       map[string]any{LabelManagedBy: ManagedBy},
				"annotations":  map[string]any{AnnotationCRD: name},
			},
			"spec": map[string]any{"resource": map[string]any{"group": crd.Spec.Group, "resource": crd.Spec.Names.Plural}},
		}}
		svm, err = svms.Create(ctx, obj, metav1.CreateOptions{FieldManager: ManagedBy})
		if err != nil {
			return nil, fmt.Errorf("creating a storageversionmigration for %s: %w", name, err)
		}
		created = true
		m.event(name, EventInTree, "%s: created storageversionmigration %s (%s/%s)", name, svm.GetName(), SVMGroup, m.Version)
	}
	res.Migration = svm.GetName()

	poll := m.Poll
	if poll <= 0 {
		poll = time.Second
	}
	ack := m.AckTimeout
	if ack <= 0 {
		ack = 30 * time.Second
	}
	waitStart := m.now()
	lastMsg := ""
	for {
		var cur *unstructured.Unstructured
		if err := m.Retry.Do(ctx, "reading storageversionmigration "+svm.GetName(), func() (err error) {
			cur, err = svms.Get(ctx, svm.GetName(), metav1.GetOptions{})
			return err
		}); err != nil {
			return res, &StoppedError{CRD: name, Err: fmt.Errorf("reading storageversionmigration %s: %w", svm.GetName(), err)}
		}
		if ok, msg := conditionTrue(cur, "Failed"); ok {
			return res, &InTreeFailedError{CRD: name, Migration: cur.GetName(), Message: msg}
		}
		if ok, _ := conditionTrue(cur, "Succeeded"); ok {
			_, msg := conditionTrue(cur, "Running")
			if mm := verified.FindStringSubmatch(msg); mm != nil {
				n, _ := strconv.ParseInt(mm[1], 10, 64)
				res.Total, res.Processed = n, n
			}
			m.event(name, EventRewritten, "%s: storageversionmigration %s succeeded", name, cur.GetName())
			break
		}
		if !acknowledged(cur) && m.now().Sub(waitStart) > ack {
			if created {
				_ = svms.Delete(context.WithoutCancel(ctx), cur.GetName(), metav1.DeleteOptions{})
			}
			return res, fmt.Errorf("%w within %s (storageversionmigration %s)", ErrNoController, ack, cur.GetName())
		}
		if _, msg := conditionTrue(cur, "Running"); msg != "" && msg != lastMsg {
			lastMsg = msg
			if mm := notYet.FindStringSubmatch(msg); mm != nil && m.OnProgress != nil {
				left, _ := strconv.ParseInt(mm[1], 10, 64)
				total, _ := strconv.ParseInt(mm[2], 10, 64)
				m.OnProgress(Progress{CRD: name, Processed: total - left, Total: total})
			}
		}
		if err := m.sleep(ctx, poll); err != nil {
			return res, &StoppedError{CRD: name, Err: fmt.Errorf("waiting for storageversionmigration %s (it keeps running in the cluster): %w", svm.GetName(), err)}
		}
	}

	// The 1.37 controller trims storedVersions once the migration is done.
	trimWait := m.TrimWait
	if trimWait <= 0 {
		trimWait = 20 * time.Second
	}
	deadline := m.now().Add(trimWait)
	for {
		cur, err := m.Ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err == nil && !NeedsMigration(cur.Status.StoredVersions, StorageVersion(cur)) && len(cur.Status.StoredVersions) == 1 {
			res.StoredVersionsAfter = cur.Status.StoredVersions
			m.event(name, EventTrimmed, "%s: status.storedVersions is now %v (trimmed by the controller)", name, cur.Status.StoredVersions)
			res.Seconds = m.now().Sub(start).Seconds()
			return res, nil
		}
		if m.now().After(deadline) {
			break
		}
		if err := m.sleep(ctx, poll); err != nil {
			return res, &StoppedError{CRD: name, Err: err}
		}
	}
	after, err := TrimStoredVersions(ctx, m.Clients, m.Retry, name, func(c *apiextv1.CustomResourceDefinition) error {
		if c.UID != crd.UID {
			return &CRDChangedError{CRD: name, Reason: "it was deleted and created again"}
		}
		if StorageVersion(c) != sv {
			return &CRDChangedError{CRD: name, Reason: fmt.Sprintf("the storage version is now %s, not %s", StorageVersion(c), sv)}
		}
		return nil
	})
	res.Seconds = m.now().Sub(start).Seconds()
	if err != nil {
		return res, err
	}
	res.StoredVersionsAfter = after
	m.event(name, EventTrimmed, "%s: status.storedVersions is now %v", name, after)
	return res, nil
}
