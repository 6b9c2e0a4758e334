package crdmigrate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func newMigrator(e *env, ns *noSleep) *Migrator {
	return &Migrator{
		Clients: e.c, Checkpoints: e.store(), Workers: 4,
		Retry: Retry{Attempts: 3, Sleep: ns.sleep},
		Now:   func() time.Time { return t0 },
	}
}

func TestMigratorRun(t *testing.T) {
	halfOld := func(i int) string {
		if i%2 == 0 {
			return "v1"
		}
		return "v2"
	}
	cases := []struct {
		name       string
		n          int
		storedAt   func(int) string
		stored     []string
		checkpoint *Checkpoint
		force      bool
		failList   func(cont string) error
		// newFailList makes a failList with state of its own for each run.
		newFailList func() func(cont string) error
		failUpdate  func(name string, attempt int) error
		want        Result
		wantLists   []string
		wantErr     string
	}{
		{
			name: "three pages, half stored at v1", n: 1203, storedAt: halfOld, stored: []string{"v1", "v2"},
			want: Result{Total: 1203, Processed: 1203, Rewritten: 602, Unchanged: 601, Pages: 3,
				StoredVersionsBefore: []string{"v1", "v2"}, StoredVersionsAfter: []string{"v2"}},
			wantLists: []string{"", "c:500", "c:1000"},
		},
		{
			name: "nothing to do", n: 10, storedAt: halfOld, stored: []string{"v2"},
			want: Result{NothingToDo: true, StoredVersionsBefore: []string{"v2"}, StoredVersionsAfter: []string{"v2"}},
		},
		{
			name: "forced rewrite of objects already at the storage version", n: 10, storedAt: func(int) string { return "v2" }, stored: []string{"v2"}, force: true,
			want: Result{Total: 10, Processed: 10, Unchanged: 10, Pages: 1,
				StoredVersionsBefore: []string{"v2"}, StoredVersionsAfter: []string{"v2"}},
			wantLists: []string{""},
		},
		{
			name: "resumes at the saved continue token", n: 1203, storedAt: halfOld, stored: []string{"v1", "v2"},
			checkpoint: &Checkpoint{CRD: testCRD, CRDUID: "uid-1", CRDGeneration: 3, StorageVersion: "v2", RunID: "abc", Phase: PhaseMigrating,
				Continue: "c:1000", Total: 1203, Processed: 1000, Rewritten: 500, Unchanged: 500, Pages: 2},
			want: Result{Resumed: true, RunID: "abc", Total: 1203, Processed: 1203, Rewritten: 602, Unchanged: 601, Pages: 3,
				StoredVersionsBefore: []string{"v1", "v2"}, StoredVersionsAfter: []string{"v2"}},
			wantLists: []string{"c:1000"},
		},
		{
			name: "a checkpoint of another storage version is discarded", n: 600, storedAt: halfOld, stored: []string{"v1", "v2"},
			checkpoint: &Checkpoint{CRD: testCRD, CRDUID: "uid-1", CRDGeneration: 2, StorageVersion: "v1", RunID: "old", Phase: PhaseMigrating, Continue: "c:500", Processed: 500},
			want: Result{Total: 600, Processed: 600, Rewritten: 300, Unchanged: 300, Pages: 2,
				StoredVersionsBefore: []string{"v1", "v2"}, StoredVersionsAfter: []string{"v2"}},
			wantLists: []string{"", "c:500"},
		},
		{
			name: "killed between the last page and the trim", n: 600, storedAt: halfOld, stored: []string{"v1", "v2"},
			checkpoint: &Checkpoint{CRD: testCRD, CRDUID: "uid-1", CRDGeneration: 3, StorageVersion: "v2", RunID: "abc", Phase: PhaseRewritten,
				Total: 600, Processed: 600, Rewritten: 300, Unchanged: 300, Pages: 2},
			want: Result{Resumed: true, RunID: "abc", Total: 600, Processed: 600, Rewritten: 300, Unchanged: 300, Pages: 2,
				StoredVersionsBefore: []string{"v1", "v2"}, StoredVersionsAfter: []string{"v2"}},
		},
		{
			name: "an expired continue token starts the list over", n: 700, storedAt: halfOld, stored: []string{"v1", "v2"},
			checkpoint: &Checkpoint{CRD: testCRD, CRDUID: "uid-1", CRDGeneration: 3, StorageVersion: "v2", RunID: "abc", Phase: PhaseMigrating,
				Continue: "c:500", Total: 700, Processed: 500, Rewritten: 250, Unchanged: 250, Pages: 1},
			newFailList: func() func(cont string) error {
				expired := false
				return func(cont string) error {
					if cont == "c:500" && !expired {
						expired = true
						return apierrors.NewResourceExpired("continue token too old")
					}
					return nil
				}
			},
			// The first 500 counted before the checkpoint count again.
			want: Result{Resumed: true, RunID: "abc", Total: 1200, Processed: 1200, Rewritten: 600, Unchanged: 600, Pages: 3, Restarts: 1,
				StoredVersionsBefore: []string{"v1", "v2"}, StoredVersionsAfter: []string{"v2"}},
			wantLists: []string{"c:500", "", "c:500"},
		},
		{
			name: "conflict and not found count as done", n: 20, storedAt: halfOld, stored: []string{"v1", "v2"},
			failUpdate: func(name string, _ int) error {
				switch name {
				case "w-00003":
					return apierrors.NewConflict(widgets.GroupResource(), name, errors.New("modified"))
				case "w-00004":
					return apierrors.NewNotFound(widgets.GroupResource(), name)
				}
				return nil
			},
			want: Result{Total: 20, Processed: 20, Rewritten: 9, Unchanged: 9, Conflicts: 1, Gone: 1, Pages: 1,
				StoredVersionsBefore: []string{"v1", "v2"}, StoredVersionsAfter: []string{"v2"}},
			wantLists: []string{""},
		},
		{
			name: "transient errors are retried", n: 4, storedAt: halfOld, stored: []string{"v1", "v2"},
			failUpdate: func(name string, attempt int) error {
				if name == "w-00002" && attempt <= 2 {
					return apierrors.NewInternalError(errors.New(`failed calling webhook "v.example.com": connection refused`))
				}
				if name == "w-00001" && attempt == 1 {
					return apierrors.NewTooManyRequests("slow down", 3)
				}
				return nil
			},
			want: Result{Total: 4, Processed: 4, Rewritten: 2, Unchanged: 2, Pages: 1,
				StoredVersionsBefore: []string{"v1", "v2"}, StoredVersionsAfter: []string{"v2"}},
			wantLists: []string{""},
		},
		{
			name: "a 404 for the resource itself is retried, not counted as gone", n: 2, storedAt: halfOld, stored: []string{"v1", "v2"},
			failUpdate: func(name string, attempt int) error {
				if attempt == 1 {
					return apierrors.NewGenericServerResponse(http.StatusNotFound, "put", widgets.GroupResource(), "", "the server could not find the requested resource", 0, true)
				}
				return nil
			},
			want: Result{Total: 2, Processed: 2, Rewritten: 1, Unchanged: 1, Pages: 1,
				StoredVersionsBefore: []string{"v1", "v2"}, StoredVersionsAfter: []string{"v2"}},
			wantLists: []string{""},
		},
	}
	for _, via := range objectPaths {
		for _, tc := range cases {
			t.Run(via+"/"+tc.name, func(t *testing.T) {
				srv := newWidgetServer(tc.n, tc.storedAt)
				srv.failList, srv.failUpdate = tc.failList, tc.failUpdate
				if tc.newFailList != nil {
					srv.failList = tc.newFailList()
				}
				e := newEnvVia(t, via, testCRDObj(tc.stored...), srv)
				ctx := context.Background()
				if tc.checkpoint != nil {
					cp := *tc.checkpoint // Save records the resourceVersion in it
					if err := e.store().Save(ctx, &cp); err != nil {
						t.Fatal(err)
					}
				}
				m := newMigrator(e, &noSleep{})
				m.Force = tc.force
				got, err := m.Run(ctx, testCRD)
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("err = %v, want %q", err, tc.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				tc.want.CRD, tc.want.Method, tc.want.StorageVersion = testCRD, MethodClient, "v2"
				if tc.want.RunID == "" {
					tc.want.RunID = got.RunID
				}
				if diff := cmp.Diff(tc.want, *got); diff != "" {
					t.Errorf("result (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.wantLists, srv.lists); diff != "" {
					t.Errorf("list continue tokens (-want +got):\n%s", diff)
				}
				// Checkpoints and injected errors claim work the fake did not do.
				if got := srv.storedCounts(); !tc.want.NothingToDo && tc.checkpoint == nil && tc.failUpdate == nil && got["v1"] != 0 {
					t.Errorf("objects still stored at v1: %v", got)
				}
				if diff := cmp.Diff([]string{"v2"}, e.storedVersions()); diff != "" {
					t.Errorf("storedVersions (-want +got):\n%s", diff)
				}
				if cp, err := e.store().Load(ctx, testCRD); err != nil || cp != nil {
					t.Errorf("checkpoint after a finished run = %+v, %v; want none", cp, err)
				}
			})
		}
	}
}

func TestMigratorRun_StopsOnObject(t *testing.T) {
	cases := []struct {
		name      string
		fail      func(name string, attempt int) error
		wantIn    string
		wantTries int
	}{
		{
			name: "webhook denies",
			fail: func(name string, _ int) error {
				if name == "w-00600" {
					return apierrors.NewBadRequest(`admission webhook "v.example.com" denied the request: frozen`)
				}
				return nil
			},
			wantIn: `rewriting widgets.example.gpufleet.dev ml/w-00600 stopped the migration`, wantTries: 1,
		},
		{
			name: "webhook keeps failing past the retries",
			fail: func(name string, _ int) error {
				if name == "w-00600" {
					return apierrors.NewInternalError(errors.New(`failed calling webhook "v.example.com": connection refused`))
				}
				return nil
			},
			wantIn: "failed calling webhook", wantTries: 4,
		},
	}
	for _, via := range objectPaths {
		for _, tc := range cases {
			t.Run(via+"/"+tc.name, func(t *testing.T) {
				srv := newWidgetServer(1203, func(int) string { return "v1" })
				srv.failUpdate = tc.fail
				e := newEnvVia(t, via, testCRDObj("v1", "v2"), srv)
				ns := &noSleep{}
				m := newMigrator(e, ns)
				res, err := m.Run(context.Background(), testCRD)
				var oe *ObjectError
				if !errors.As(err, &oe) {
					t.Fatalf("err = %v, want *ObjectError", err)
				}
				if oe.Object != "ml/w-00600" || !strings.Contains(err.Error(), tc.wantIn) {
					t.Errorf("err = %v", err)
				}
				if srv.attempts["w-00600"] != tc.wantTries {
					t.Errorf("tries of the failing object = %d, want %d", srv.attempts["w-00600"], tc.wantTries)
				}
				if diff := cmp.Diff([]string{"v1", "v2"}, e.storedVersions()); diff != "" {
					t.Errorf("storedVersions must be untouched after a partial run (-want +got):\n%s", diff)
				}
				if n := e.statusUpdates(); n != 0 {
					t.Errorf("%d status updates after a partial run", n)
				}
				cp, err := e.store().Load(context.Background(), testCRD)
				if err != nil || cp == nil {
					t.Fatalf("checkpoint = %v, %v", cp, err)
				}
				if cp.Continue != "c:500" || cp.Pages != 1 || cp.Processed != 500 || cp.Phase != PhaseMigrating {
					t.Errorf("checkpoint = %+v, want the second page next", cp)
				}
				if res == nil || res.RunID != cp.RunID {
					t.Errorf("result = %+v", res)
				}

				// The webhook is fixed: the next run resumes at the second page.
				srv.failUpdate = nil
				srv.lists = nil
				res, err = newMigrator(e, ns).Run(context.Background(), testCRD)
				if err != nil {
					t.Fatal(err)
				}
				if !res.Resumed || res.Processed != 1203 || srv.lists[0] != "c:500" {
					t.Errorf("resumed result = %+v, lists %v", res, srv.lists)
				}
				if got := srv.storedCounts(); got["v1"] != 0 {
					t.Errorf("objects still at v1: %v", got)
				}
				if diff := cmp.Diff([]string{"v2"}, e.storedVersions()); diff != "" {
					t.Errorf("storedVersions (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestMigratorRun_Interrupted(t *testing.T) {
	srv := newWidgetServer(1200, func(int) string { return "v1" })
	e := newEnv(testCRDObj("v1", "v2"), srv)
	ctx, cancel := context.WithCancel(context.Background())
	srv.failUpdate = func(name string, _ int) error {
		if name == "w-00700" {
			cancel()
		}
		return nil
	}
	_, err := newMigrator(e, &noSleep{}).Run(ctx, testCRD)
	var se *StoppedError
	if !errors.As(err, &se) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a StoppedError wrapping context.Canceled", err)
	}
	if diff := cmp.Diff([]string{"v1", "v2"}, e.storedVersions()); diff != "" {
		t.Errorf("storedVersions (-want +got):\n%s", diff)
	}
	cp, _ := e.store().Load(context.Background(), testCRD)
	if cp == nil || cp.Continue != "c:500" {
		t.Errorf("checkpoint = %+v, want the second page next", cp)
	}
}

func TestMigratorRun_CRDChanged(t *testing.T) {
	cases := []struct {
		name      string
		n         int
		at        string
		generated bool // only the generation changes (a CA bundle injected)
		wantErr   bool
		wantPages int64
	}{
		{name: "storage version changed on the last page", n: 10, at: "w-00005", wantErr: true, wantPages: 1},
		{name: "storage version changed on the first of two pages", n: 600, at: "w-00010", wantErr: true, wantPages: 1},
		{name: "only the generation changed", n: 600, at: "w-00010", generated: true, wantPages: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newWidgetServer(tc.n, func(int) string { return "v1" })
			e := newEnv(testCRDObj("v1", "v2"), srv)
			srv.failUpdate = func(name string, attempt int) error {
				if name == tc.at && attempt == 1 {
					crd, _ := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), testCRD, metav1.GetOptions{})
					crd.Generation++
					if !tc.generated {
						crd.Spec.Versions[0].Storage, crd.Spec.Versions[1].Storage = true, false
					}
					_, _ = e.ext.ApiextensionsV1().CustomResourceDefinitions().Update(context.Background(), crd, metav1.UpdateOptions{})
				}
				return nil
			}
			res, err := newMigrator(e, &noSleep{}).Run(context.Background(), testCRD)
			var ce *CRDChangedError
			if tc.wantErr != errors.As(err, &ce) {
				t.Fatalf("err = %v, want CRDChangedError: %v", err, tc.wantErr)
			}
			if res.Pages != tc.wantPages {
				t.Errorf("pages = %d, want %d", res.Pages, tc.wantPages)
			}
			want := []string{"v2"}
			if tc.wantErr {
				want = []string{"v1", "v2"}
			}
			if diff := cmp.Diff(want, e.storedVersions()); diff != "" {
				t.Errorf("storedVersions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMigratorRun_ConcurrentRun(t *testing.T) {
	srv := newWidgetServer(600, func(int) string { return "v1" })
	e := newEnv(testCRDObj("v1", "v2"), srv)
	// Another run rewrites the checkpoint while this one works on page 1.
	srv.failUpdate = func(name string, _ int) error {
		if name == "w-00010" {
			other := e.store()
			cp, _ := other.Load(context.Background(), testCRD)
			cp.RunID = "other"
			_ = other.Save(context.Background(), cp)
		}
		return nil
	}
	_, err := newMigrator(e, &noSleep{}).Run(context.Background(), testCRD)
	if !errors.Is(err, ErrConcurrentRun) {
		t.Fatalf("err = %v, want ErrConcurrentRun", err)
	}
}

func TestRetry(t *testing.T) {
	cases := []struct {
		name      string
		errs      []error
		attempts  int
		wantWaits []time.Duration
		wantErr   bool
	}{
		{"success first", []error{nil}, 3, nil, false},
		{"backoff doubles", []error{apierrors.NewServiceUnavailable("x"), apierrors.NewServiceUnavailable("x"), apierrors.NewServiceUnavailable("x"), nil}, 3,
			[]time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second}, false},
		{"retry-after wins when longer", []error{apierrors.NewTooManyRequests("x", 5), nil}, 3, []time.Duration{5 * time.Second}, false},
		{"gives up", []error{apierrors.NewInternalError(errors.New("x")), apierrors.NewInternalError(errors.New("x"))}, 1, []time.Duration{250 * time.Millisecond}, true},
		{"no retry on bad request", []error{apierrors.NewBadRequest("x")}, 3, nil, true},
		{"no retry on forbidden", []error{apierrors.NewForbidden(widgets.GroupResource(), "w", errors.New("no"))}, 3, nil, true},
		{"connection refused is retried", []error{fmt.Errorf("dial: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), nil}, 3, []time.Duration{250 * time.Millisecond}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := &noSleep{}
			i := 0
			err := Retry{Attempts: tc.attempts, Sleep: ns.sleep}.Do(context.Background(), "x", func() error {
				e := tc.errs[min(i, len(tc.errs)-1)]
				i++
				return e
			})
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantWaits, ns.waits); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEstimateRun(t *testing.T) {
	cases := []struct {
		n     int64
		qps   float64
		burst int
		want  Estimate
	}{
		{10000, 500, 500, Estimate{Objects: 10000, Requests: 10046, Seconds: 19.092}},
		{0, 50, 50, Estimate{Objects: 0, Requests: 8, Seconds: 0}},
		{1100, 100, 100, Estimate{Objects: 1100, Requests: 1112, Seconds: 10.12}},
	}
	for _, tc := range cases {
		got := EstimateRun(tc.n, PageSize, tc.qps, tc.burst)
		if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 })); diff != "" {
			t.Errorf("EstimateRun(%d) (-want +got):\n%s", tc.n, diff)
		}
	}
}
