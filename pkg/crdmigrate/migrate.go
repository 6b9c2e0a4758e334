package crdmigrate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Methods of migration.
const (
	MethodClient = "client"
	MethodInTree = "in-tree"
)

// Result is the outcome of migrating one CRD.
type Result struct {
	CRD            string `json:"crd"`
	Method         string `json:"method"`
	StorageVersion string `json:"storageVersion"`
	// RunID identifies a client-side run across resumes.
	RunID string `json:"runID,omitempty"`
	// Migration names the StorageVersionMigration of an in-tree run.
	Migration string `json:"storageVersionMigration,omitempty"`
	Resumed   bool   `json:"resumed,omitempty"`
	// NothingToDo is set when storedVersions already held only the storage
	// version (and no rewrite was forced).
	NothingToDo bool  `json:"nothingToDo,omitempty"`
	Total       int64 `json:"total"`
	Processed   int64 `json:"processed"`
	// Rewritten objects were written to etcd again; Unchanged ones already
	// encoded identically at the storage version, so the apiserver skipped
	// the write; Conflicts were changed (so rewritten) by someone else
	// since they were listed; Gone were deleted.
	Rewritten            int64    `json:"rewritten"`
	Unchanged            int64    `json:"unchanged"`
	Conflicts            int64    `json:"conflicts"`
	Gone                 int64    `json:"gone"`
	Pages                int64    `json:"pages"`
	Restarts             int      `json:"restarts,omitempty"`
	StoredVersionsBefore []string `json:"storedVersionsBefore"`
	StoredVersionsAfter  []string `json:"storedVersionsAfter"`
	Seconds              float64  `json:"seconds"`
}

// EventType names a state change.
type EventType string

// Event types.
const (
	EventStarted    EventType = "Started"
	EventResumed    EventType = "Resumed"
	EventPage       EventType = "PageDone"
	EventRestarted  EventType = "ListRestarted"
	EventRetry      EventType = "Retry"
	EventRewritten  EventType = "AllRewritten"
	EventTrimmed    EventType = "StoredVersionsTrimmed"
	EventInTree     EventType = "InTreeMigration"
	EventNothing    EventType = "NothingToDo"
	EventStaleCheck EventType = "CheckpointDiscarded"
)

// Event is one state change of a run, for progress lines.
type Event struct {
	CRD     string
	Type    EventType
	Message string
}

// Progress is the running count of a run, reported after every object.
type Progress struct {
	CRD       string
	Processed int64
	Total     int64
	// Session counts the objects processed by this process (for a rate).
	Session int64
}

// ObjectError stops a run on one object: the write failed with an error
// that is not transient, or transient errors outlasted the retries. The
// checkpoint still points at the page holding the object, so running
// again resumes there.
type ObjectError struct {
	CRD       string
	Resource  schema.GroupResource
	Object    string
	Processed int64
	Total     int64
	Err       error
}

func (e *ObjectError) Error() string {
	return fmt.Sprintf("rewriting %s %s stopped the migration of %s after %d of %d objects: %v", e.Resource, e.Object, e.CRD, e.Processed, e.Total, e.Err)
}

func (e *ObjectError) Unwrap() error { return e.Err }

// StoppedError means a run stopped between objects (interrupted, or the
// list or checkpoint could not be read or written); it is resumable.
type StoppedError struct {
	CRD       string
	Processed int64
	Total     int64
	Err       error
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("migration of %s stopped after %d of %d objects: %v", e.CRD, e.Processed, e.Total, e.Err)
}

func (e *StoppedError) Unwrap() error { return e.Err }

// CRDChangedError means the CRD changed while its objects were rewritten,
// so storedVersions was left alone; a new run rewrites under the new spec.
type CRDChangedError struct {
	CRD    string
	Reason string
}

func (e *CRDChangedError) Error() string {
	return fmt.Sprintf("customresourcedefinition %s changed during the migration (%s); storedVersions left unchanged", e.CRD, e.Reason)
}

// StoredVersionsError means status.storedVersions did not read back as
// written.
type StoredVersionsError struct {
	CRD       string
	Want, Got []string
}

func (e *StoredVersionsError) Error() string {
	return fmt.Sprintf("customresourcedefinition %s: status.storedVersions reads back %v after writing %v", e.CRD, e.Got, e.Want)
}

// Migrator rewrites every stored object of a CRD at its storage version
// with a client-side loop, then trims status.storedVersions.
//
// The write is an Update (PUT) of each object exactly as it was listed at
// the storage version, with its resourceVersion as precondition. Every
// update makes the apiserver convert the object to the storage version and
// encode it; its storage layer (GuaranteedUpdate in k8s.io/apiserver's etcd3
// store) then compares the new bytes with the bytes in etcd and skips the
// write when they are identical and not stale under the encryption config.
// That is exactly the rewrite wanted: an object already stored at the
// storage version encodes to the same bytes and costs no etcd write (the
// response keeps its resourceVersion, counted as Unchanged), while an object
// stored at an older version carries a different apiVersion, so its bytes
// differ and it is written at the storage version (a new resourceVersion,
// counted as Rewritten). Field managers add no managedFields entry and no
// timestamp when nothing changed, so no-op updates stay no-ops. A Conflict
// means the object changed after it was listed, which already rewrote it
// at the storage version; NotFound for the object means it is gone. Both
// count as done. (The in-tree StorageVersionMigration controller sends an
// empty merge patch with the resourceVersion for the same reason.)
//
// Such a rewrite costs the apiserver about two updates. The store first
// tries the update on its watch cache's copy, which re-encodes at the
// storage version to the same bytes as the new object; taking that for a
// no-op, it reads etcd, finds the older version's bytes, and runs the
// update again before writing. Every content-neutral rewrite pays this,
// the in-tree controller's too.
//
// Pages of PageSize objects are listed at the storage version. After each
// page the continue token of the next one is saved in the checkpoint, so a
// run that stops resumes at the first page not done; an expired token (410)
// starts the list over, which is cheap because finished objects are no-ops.
// Objects created after the list started are written at the storage
// version already. After every page the CRD is read again: a new storage
// version (or a re-created CRD) stops the run with *CRDChangedError rather
// than trimming over objects written at another version. (An apiserver of
// an HA control plane that has not yet seen the new storage version could
// still write the old one for a moment after the switch; start the
// migration after the switch has settled.) storedVersions is trimmed only
// when every page is done,
// through the /status subresource (updates of the main resource ignore
// status), and read back.
type Migrator struct {
	Clients
	Checkpoints *CheckpointStore
	// Workers is the number of concurrent writes (default 8).
	Workers int
	// PageSize is the list page size (default PageSize).
	PageSize int64
	// Force rewrites even when storedVersions holds only the storage version.
	Force bool
	Retry Retry
	// FieldManager names the writer (default kubectl-crd-migrate).
	FieldManager string
	// Now returns the current time; nil means time.Now.
	Now        func() time.Time
	OnEvent    func(Event)
	OnProgress func(Progress)
}

func (m *Migrator) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Migrator) event(crd string, t EventType, format string, args ...any) {
	if m.OnEvent != nil {
		m.OnEvent(Event{CRD: crd, Type: t, Message: fmt.Sprintf(format, args...)})
	}
}

func (m *Migrator) retry() Retry {
	r := m.Retry
	if r.OnRetry == nil && m.OnEvent != nil {
		r.OnRetry = func(what string, attempt int, wait time.Duration, err error) {
			m.OnEvent(Event{Type: EventRetry, Message: fmt.Sprintf("retry %d/%d of %s in %s: %v", attempt, r.attempts(), what, wait.Round(time.Millisecond), err)})
		}
	}
	return r
}

// NewRunID returns a short random run id.
func NewRunID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Run migrates one CRD. Errors after the first write are *ObjectError,
// *StoppedError, *CRDChangedError or *StoredVersionsError; all of them leave
// a checkpoint from which running again resumes.
func (m *Migrator) Run(ctx context.Context, name string) (*Result, error) {
	start := m.now()
	r := m.retry()
	var crd *apiextv1.CustomResourceDefinition
	if err := r.Do(ctx, "reading customresourcedefinition "+name, func() (err error) {
		crd, err = m.Ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		return err
	}); err != nil {
		return nil, fmt.Errorf("reading customresourcedefinition %s: %w", name, err)
	}
	sv := StorageVersion(crd)
	if sv == "" {
		return nil, fmt.Errorf("customresourcedefinition %s has no storage version", name)
	}
	res := &Result{CRD: name, Method: MethodClient, StorageVersion: sv, StoredVersionsBefore: append([]string{}, crd.Status.StoredVersions...)}
	var cp *Checkpoint
	if err := r.Do(ctx, "reading the checkpoint", func() (err error) {
		cp, err = m.Checkpoints.Load(ctx, name)
		return err
	}); err != nil {
		return nil, err
	}
	resume := cp.Matches(string(crd.UID), sv) && (cp.Phase == PhaseMigrating || cp.Phase == PhaseRewritten)
	if !resume && !m.Force && !NeedsMigration(crd.Status.StoredVersions, sv) {
		if cp != nil {
			if err := m.Checkpoints.Delete(ctx, cp); err != nil {
				return nil, err
			}
		}
		res.NothingToDo = true
		res.StoredVersionsAfter = res.StoredVersionsBefore
		res.Seconds = m.now().Sub(start).Seconds()
		m.event(name, EventNothing, "%s: storedVersions is already [%s]; nothing to do", name, sv)
		return res, nil
	}
	if resume {
		res.Resumed = true
		m.event(name, EventResumed, "%s: resuming run %s at %d of %d objects (checkpoint %s)", name, cp.RunID, cp.Processed, cp.Total, m.Checkpoints.Where(name))
	} else {
		if cp != nil && cp.RunID != "" {
			m.event(name, EventStaleCheck, "%s: discarding the checkpoint of run %s: the CRD or its storage version changed since", name, cp.RunID)
		}
		rv := ""
		if cp != nil {
			rv = cp.resourceVersion
		}
		cp = &Checkpoint{
			CRD: name, CRDUID: string(crd.UID), CRDGeneration: crd.Generation, StorageVersion: sv,
			RunID: NewRunID(), Phase: PhaseMigrating, StartedAt: metav1.NewTime(m.now().UTC().Truncate(time.Second)),
			resourceVersion: rv,
		}
		if err := m.save(ctx, cp); err != nil {
			return nil, err
		}
		m.event(name, EventStarted, "%s: run %s rewrites objects at %s (storedVersions %v; checkpoint %s)", name, cp.RunID, sv, crd.Status.StoredVersions, m.Checkpoints.Where(name))
	}
	res.RunID = cp.RunID

	gvr := GVR(crd)
	var session atomic.Int64
	if cp.Phase == PhaseMigrating {
		if err := m.rewriteAll(ctx, crd, gvr, cp, &session); err != nil {
			fill(res, cp)
			res.Seconds = m.now().Sub(start).Seconds()
			return res, err
		}
	}
	fill(res, cp)
	after, err := m.trim(ctx, crd, cp)
	res.Seconds = m.now().Sub(start).Seconds()
	if err != nil {
		return res, err
	}
	res.StoredVersionsAfter = after
	if err := r.Do(ctx, "deleting the checkpoint", func() error { return m.Checkpoints.Delete(ctx, cp) }); err != nil {
		return res, &StoppedError{CRD: name, Processed: cp.Processed, Total: cp.Total, Err: err}
	}
	return res, nil
}

func fill(res *Result, cp *Checkpoint) {
	res.Total, res.Processed = cp.Total, cp.Processed
	res.Rewritten, res.Unchanged, res.Conflicts, res.Gone = cp.Rewritten, cp.Unchanged, cp.Conflicts, cp.Gone
	res.Pages, res.Restarts = cp.Pages, cp.Restarts
}

func (m *Migrator) save(ctx context.Context, cp *Checkpoint) error {
	return m.retry().Do(ctx, "saving the checkpoint", func() error { return m.Checkpoints.Save(ctx, cp) })
}

// maxRestarts bounds how often an expired continue token may start the
// list over within one run.
const maxRestarts = 5

type page struct {
	items     []RawObject
	next      string
	remaining *int64
	restarted bool
	err       error
}

// list reads one page, retrying transient errors. An expired continue token
// restarts the list from the beginning (restarted is set). A list that
// timed out is blamed on the conversion webhook, if any (cw).
func (m *Migrator) list(ctx context.Context, objs Objects, gvr schema.GroupVersionResource, cont string, size int64, cw conversionWebhook) page {
	var p page
	restarted, timedOut := false, false
	err := m.retry().Do(ctx, "listing", func() error {
		l, err := objs.List(ctx, gvr, metav1.ListOptions{Limit: size, Continue: cont})
		if err != nil && cont != "" && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) {
			cont, restarted = "", true
			l, err = objs.List(ctx, gvr, metav1.ListOptions{Limit: size})
		}
		if err != nil {
			timedOut = timedOut || IsTimeout(err)
			return err
		}
		p = page{items: l.Items, next: l.Continue, remaining: l.Remaining}
		return nil
	})
	p.restarted, p.err = restarted, cw.explain(err, timedOut)
	return p
}

func (m *Migrator) rewriteAll(ctx context.Context, crd *apiextv1.CustomResourceDefinition, gvr schema.GroupVersionResource, cp *Checkpoint, session *atomic.Int64) error {
	size := m.PageSize
	if size <= 0 {
		size = PageSize
	}
	objs := m.objects()
	stopped := func(err error) error {
		return &StoppedError{CRD: cp.CRD, Processed: cp.Processed, Total: cp.Total, Err: err}
	}
	cw := conversionWebhookOf(crd)
	// after is the last object of the last page done by this process, so
	// that a list that fails says where it was.
	after := ""
	cur := m.list(ctx, objs, gvr, cp.Continue, size, cw)
	for {
		if cur.err != nil {
			where := ""
			switch {
			case after != "":
				where = " (after " + after + ")"
			case cp.Continue != "":
				where = " (resuming from the checkpoint)"
			}
			return stopped(fmt.Errorf("listing page %d of %s%s: %w", cp.Pages+1, gvr.GroupResource(), where, cur.err))
		}
		if cur.restarted {
			cp.Restarts++
			if cp.Restarts > maxRestarts {
				return stopped(fmt.Errorf("the list continue token expired %d times; the list cannot finish within the etcd compaction interval", cp.Restarts))
			}
			m.event(cp.CRD, EventRestarted, "%s: the continue token expired; listing again from the start (finished objects are no-op writes)", cp.CRD)
		}
		if cur.remaining != nil {
			cp.Total = cp.Processed + int64(len(cur.items)) + *cur.remaining
		} else if cur.next == "" {
			cp.Total = cp.Processed + int64(len(cur.items))
		} else if cp.Total < cp.Processed+int64(len(cur.items)) {
			cp.Total = cp.Processed + int64(len(cur.items))
		}
		// Read the next page while this one is written.
		var next chan page
		pageCtx, cancel := context.WithCancel(ctx)
		if cur.next != "" {
			next = make(chan page, 1)
			go func(cont string) { next <- m.list(pageCtx, objs, gvr, cont, size, cw) }(cur.next)
		}
		err := m.rewritePage(pageCtx, gvr, cw, cur.items, cp, session)
		if err != nil {
			cancel()
			if ctx.Err() != nil {
				return stopped(ctx.Err())
			}
			return err
		}
		cp.Continue = cur.next
		cp.Pages++
		if n := len(cur.items); n > 0 {
			after = cur.items[n-1].Ref()
		}
		if cur.next == "" {
			cp.Phase = PhaseRewritten
			cp.Total = cp.Processed
		}
		if err := m.save(ctx, cp); err != nil {
			cancel()
			return stopped(err)
		}
		if cur.next == "" {
			cancel()
			m.event(cp.CRD, EventRewritten, "%s: all %d objects done (%d rewritten, %d already at %s, %d changed meanwhile, %d gone)", cp.CRD, cp.Processed, cp.Rewritten, cp.Unchanged, cp.StorageVersion, cp.Conflicts, cp.Gone)
			return nil
		}
		m.event(cp.CRD, EventPage, "%s: page %d done, %d/%d objects (%d rewritten)", cp.CRD, cp.Pages, cp.Processed, cp.Total, cp.Rewritten)
		if err := m.checkCRD(ctx, cp); err != nil {
			cancel()
			return err
		}
		cur = <-next
		cancel()
		if ctx.Err() != nil {
			return stopped(ctx.Err())
		}
	}
}

type outcome int

const (
	outRewritten outcome = iota
	outUnchanged
	outConflict
	outGone
)

// rewritePage writes every item with the workers; the first object that
// fails stops the others and is returned as *ObjectError. The counters of
// cp advance as objects finish; they are saved only with the whole page.
func (m *Migrator) rewritePage(ctx context.Context, gvr schema.GroupVersionResource, cw conversionWebhook, items []RawObject, cp *Checkpoint, session *atomic.Int64) error {
	workers := m.Workers
	if workers <= 0 {
		workers = 8
	}
	workers = min(workers, max(len(items), 1))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	work := make(chan *RawObject)
	fm := m.FieldManager
	if fm == "" {
		fm = ManagedBy
	}
	objs := m.objects()
	r := m.retry()
	for range workers {
		wg.Go(func() {
			for obj := range work {
				out, err := m.rewrite(ctx, objs, gvr, obj, fm, r, cw)
				mu.Lock()
				if err != nil {
					if firstErr == nil && ctx.Err() == nil {
						firstErr = &ObjectError{CRD: cp.CRD, Resource: gvr.GroupResource(), Object: obj.Ref(), Processed: cp.Processed, Total: cp.Total, Err: err}
						cancel()
					}
					mu.Unlock()
					continue
				}
				cp.Processed++
				switch out {
				case outRewritten:
					cp.Rewritten++
				case outUnchanged:
					cp.Unchanged++
				case outConflict:
					cp.Conflicts++
				case outGone:
					cp.Gone++
				}
				p := Progress{CRD: cp.CRD, Processed: cp.Processed, Total: cp.Total, Session: session.Add(1)}
				mu.Unlock()
				if m.OnProgress != nil {
					m.OnProgress(p)
				}
			}
		})
	}
feed:
	for i := range items {
		select {
		case work <- &items[i]:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// rewrite updates one object as listed; see Migrator for why. An update
// that timed out is blamed on the conversion webhook, if any (cw).
func (m *Migrator) rewrite(ctx context.Context, objs Objects, gvr schema.GroupVersionResource, obj *RawObject, fieldManager string, r Retry, cw conversionWebhook) (outcome, error) {
	var result outcome
	timedOut := false
	err := r.Do(ctx, "updating "+obj.Ref(), func() error {
		rv, err := objs.Update(ctx, gvr, obj, fieldManager)
		switch {
		case err == nil:
			if rv == obj.ResourceVersion {
				result = outUnchanged
			} else {
				result = outRewritten
			}
			return nil
		case apierrors.IsConflict(err):
			result = outConflict
			return nil
		case isObjectNotFound(err, obj.Name):
			result = outGone
			return nil
		}
		timedOut = timedOut || IsTimeout(err)
		return err
	})
	return result, cw.explain(err, timedOut)
}

// trim sets status.storedVersions to the storage version through the
// /status subresource and reads it back, unless the CRD changed since the
// run started.
func (m *Migrator) trim(ctx context.Context, start *apiextv1.CustomResourceDefinition, cp *Checkpoint) ([]string, error) {
	after, err := TrimStoredVersions(ctx, m.Clients, m.retry(), start.Name, func(crd *apiextv1.CustomResourceDefinition) error {
		return sameStorage(crd, cp)
	})
	if err != nil {
		var changed *CRDChangedError
		if errors.As(err, &changed) {
			return nil, err
		}
		var svErr *StoredVersionsError
		if errors.As(err, &svErr) {
			return nil, err
		}
		return nil, &StoppedError{CRD: cp.CRD, Processed: cp.Processed, Total: cp.Total, Err: err}
	}
	m.event(cp.CRD, EventTrimmed, "%s: status.storedVersions is now %v", cp.CRD, after)
	return after, nil
}

// sameStorage checks that crd is still the object and storage version the
// run rewrites for.
func sameStorage(crd *apiextv1.CustomResourceDefinition, cp *Checkpoint) error {
	if string(crd.UID) != cp.CRDUID {
		return &CRDChangedError{CRD: crd.Name, Reason: "it was deleted and created again"}
	}
	if sv := StorageVersion(crd); sv != cp.StorageVersion {
		return &CRDChangedError{CRD: crd.Name, Reason: fmt.Sprintf("the storage version is now %s, not %s", sv, cp.StorageVersion)}
	}
	return nil
}

// checkCRD reads the CRD again and checks its storage version, so a change
// during the run stops it instead of trimming storedVersions over objects
// written at another version.
func (m *Migrator) checkCRD(ctx context.Context, cp *Checkpoint) error {
	var crd *apiextv1.CustomResourceDefinition
	if err := m.retry().Do(ctx, "reading customresourcedefinition "+cp.CRD, func() (err error) {
		crd, err = m.Ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, cp.CRD, metav1.GetOptions{})
		return err
	}); err != nil {
		return &StoppedError{CRD: cp.CRD, Processed: cp.Processed, Total: cp.Total, Err: err}
	}
	return sameStorage(crd, cp)
}

// TrimStoredVersions sets status.storedVersions of the named CRD to its
// storage version with UpdateStatus (the /status subresource; a write to
// the main resource would silently drop the change), retrying conflicts,
// and reads it back to confirm. check, when set, vets the CRD read just
// before the write; its error stops the trim.
func TrimStoredVersions(ctx context.Context, c Clients, r Retry, name string, check func(*apiextv1.CustomResourceDefinition) error) ([]string, error) {
	crds := c.Ext.ApiextensionsV1().CustomResourceDefinitions()
	var want []string
	for attempt := 0; ; attempt++ {
		var crd *apiextv1.CustomResourceDefinition
		if err := r.Do(ctx, "reading customresourcedefinition "+name, func() (err error) {
			crd, err = crds.Get(ctx, name, metav1.GetOptions{})
			return err
		}); err != nil {
			return nil, fmt.Errorf("reading customresourcedefinition %s: %w", name, err)
		}
		if check != nil {
			if err := check(crd); err != nil {
				return nil, err
			}
		}
		want = []string{StorageVersion(crd)}
		if slices.Equal(crd.Status.StoredVersions, want) {
			break
		}
		crd.Status.StoredVersions = want
		err := r.Do(ctx, "updating status.storedVersions of "+name, func() error {
			_, err := crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{FieldManager: ManagedBy})
			return err
		})
		if apierrors.IsConflict(err) && attempt < 5 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("updating status.storedVersions of customresourcedefinition %s: %w", name, err)
		}
		break
	}
	var got *apiextv1.CustomResourceDefinition
	if err := r.Do(ctx, "reading back customresourcedefinition "+name, func() (err error) {
		got, err = crds.Get(ctx, name, metav1.GetOptions{})
		return err
	}); err != nil {
		return nil, fmt.Errorf("reading back customresourcedefinition %s: %w", name, err)
	}
	if !slices.Equal(got.Status.StoredVersions, want) {
		return nil, &StoredVersionsError{CRD: name, Want: want, Got: got.Status.StoredVersions}
	}
	return got.Status.StoredVersions, nil
}
