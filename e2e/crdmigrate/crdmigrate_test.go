//go:build e2e

package crdmigratee2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCRDMigrateClient is the basic path: status reports the migration,
// --dry-run changes nothing, run rewrites every object (proved through
// etcd) and trims storedVersions, a second run has nothing to do, and a
// forced run rewrites nothing because the apiserver skips identical bytes.
func TestCRDMigrateClient(t *testing.T) {
	f := newFixture(t, "basic", 1100)
	if got := f.storedAt(t); got[f.group+"/v1"] != f.objects {
		t.Fatalf("before the run, objects in etcd by apiVersion = %v, want all %d at v1", got, f.objects)
	}

	// status: migration needed, exit 1.
	r := f.run(t, "status", f.crdName, "-o", "json")
	if r.ExitCode != 1 {
		t.Fatalf("status: want exit 1\n%s", r)
	}
	var st struct {
		Items []struct {
			Verdict        string   `json:"verdict"`
			Objects        int64    `json:"objects"`
			StorageVersion string   `json:"storageVersion"`
			StoredVersions []string `json:"storedVersions"`
			Conversion     string   `json:"conversion"`
		} `json:"items"`
		Summary struct {
			InTreeAPI string `json:"inTreeAPI"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil || len(st.Items) != 1 {
		t.Fatalf("status report: %v\n%s", err, r)
	}
	it := st.Items[0]
	if it.Verdict != "warn" || it.Objects != int64(f.objects) || it.StorageVersion != "v2" || !slices.Equal(it.StoredVersions, []string{"v1", "v2"}) || it.Conversion != "None" {
		t.Errorf("status item = %+v", it)
	}
	if st.Summary.InTreeAPI != "storagemigration.k8s.io/v1" {
		t.Errorf("summary.inTreeAPI = %q, want storagemigration.k8s.io/v1", st.Summary.InTreeAPI)
	}

	// --dry-run: counts and estimate, nothing changed.
	r = f.run(t, "run", f.crdName, "--dry-run=server", "--qps", "100", "-o", "json")
	if r.ExitCode != 0 {
		t.Fatalf("dry run: want exit 0\n%s", r)
	}
	var plan struct {
		Items []struct {
			Objects  int64 `json:"objects"`
			Estimate struct {
				Requests int64   `json:"requests"`
				Seconds  float64 `json:"seconds"`
			} `json:"estimate"`
			Probe string `json:"probe"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &plan); err != nil || len(plan.Items) != 1 {
		t.Fatalf("plan: %v\n%s", err, r)
	}
	if p := plan.Items[0]; p.Objects != int64(f.objects) || p.Estimate.Requests < int64(f.objects) || p.Estimate.Seconds < 9 || p.Estimate.Seconds > 13 || !strings.Contains(p.Probe, "ok") {
		t.Errorf("plan item = %+v, want %d objects, about 11s at --qps 100 and an ok probe", p, f.objects)
	}
	if got := f.storedAt(t); got[f.group+"/v1"] != f.objects {
		t.Errorf("after --dry-run, objects in etcd by apiVersion = %v, want all still at v1", got)
	}
	if cp := f.checkpoint(t); cp != nil {
		t.Errorf("--dry-run left a checkpoint: %+v", cp)
	}

	// run: every object rewritten at v2, storedVersions trimmed.
	r = f.run(t, "run", f.crdName, "--method", "client", "--qps", "1000", "--workers", "16", "-o", "json")
	if r.ExitCode != 0 {
		t.Fatalf("run: want exit 0\n%s", r)
	}
	rep := parseRun(t, r).Items[0]
	if rep.Method != "client" || rep.Processed != int64(f.objects) || rep.Rewritten != int64(f.objects) || rep.Outcome != "done" || !slices.Equal(rep.StoredVersionsAfter, []string{"v2"}) {
		t.Errorf("run item = %+v", rep)
	}
	f.assertAllAtV2(t)
	if cp := f.checkpoint(t); cp != nil {
		t.Errorf("a finished run left its checkpoint: %+v", cp)
	}

	// Second run: nothing to do.
	r = f.run(t, "run", f.crdName, "--method", "client", "-o", "json")
	if r.ExitCode != 0 || !parseRun(t, r).Items[0].NothingToDo {
		t.Errorf("second run: want exit 0 and nothingToDo\n%s", r)
	}
	r = f.run(t, "status", f.crdName)
	if r.ExitCode != 0 || !strings.Contains(r.Stdout, "OK") {
		t.Errorf("status after the run: want exit 0 and OK\n%s", r)
	}

	// --force: objects already at v2 encode to the same bytes, so the
	// apiserver writes nothing: same mod revisions in etcd.
	before := f.modRevisions(t)
	r = f.run(t, "run", f.crdName, "--method", "client", "--force", "--qps", "1000", "--workers", "16", "-o", "json")
	if r.ExitCode != 0 {
		t.Fatalf("forced run: want exit 0\n%s", r)
	}
	rep = parseRun(t, r).Items[0]
	if rep.Unchanged != int64(f.objects) || rep.Rewritten != 0 {
		t.Errorf("forced run: rewritten %d, unchanged %d; want 0 and %d", rep.Rewritten, rep.Unchanged, f.objects)
	}
	after := f.modRevisions(t)
	changed := 0
	for k, rev := range before {
		if after[k] != rev {
			changed++
		}
	}
	if changed != 0 || len(after) != f.objects {
		t.Errorf("forced run changed %d etcd keys (of %d); want none", changed, len(after))
	}
}

// TestCRDMigrateKillResume kills the plugin with SIGKILL three times
// (after its first checkpoint, in the middle of a later page, right after
// another checkpoint) and runs it again each time: every re-run resumes the
// same run, storedVersions is untouched by the partial runs, and the last
// run finishes with no object missed, checked through etcd.
func TestCRDMigrateKillResume(t *testing.T) {
	f := newFixture(t, "resume", 1600)
	s := f.start(t, "run", f.crdName, "--method", "client", "--qps", "100", "--burst", "1", "--workers", "4")
	cp := f.waitForPages(t, s, 1)
	if err := s.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s.Wait(t, 10*time.Second)
	if s.ExitCode() != -1 {
		t.Logf("killed plugin exit code %d", s.ExitCode())
	}
	if sv := f.storedVersions(t); !slices.Equal(sv, []string{"v1", "v2"}) {
		t.Fatalf("storedVersions after a killed run = %v, want [v1 v2] untouched", sv)
	}
	cp = f.checkpoint(t)
	if cp == nil || cp.Phase != "Migrating" || cp.Pages < 1 || cp.Processed < 500 || cp.Continue == "" {
		t.Fatalf("checkpoint after the kill = %+v", cp)
	}
	atV1 := f.storedAt(t)[f.group+"/v1"]
	if atV1 == 0 {
		t.Fatalf("the killed run had already finished every object; the test needs it to stop midway")
	}
	t.Logf("killed after %d pages (%d objects); %d objects still at v1", cp.Pages, cp.Processed, atV1)
	runID := cp.RunID

	// Two more kills of resumed runs: one in the middle of a page (its
	// objects rewritten, the checkpoint not yet saved), one right after a
	// page's checkpoint. Each leaves the run resumable and storedVersions
	// alone.
	for i, midPage := range []bool{true, false} {
		before := cp
		s := f.start(t, "run", f.crdName, "--method", "client", "--qps", "100", "--burst", "1", "--workers", "4")
		cp = f.waitForPages(t, s, before.Pages+1)
		if midPage {
			time.Sleep(time.Second) // about 100 objects into the next page
		}
		if err := s.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		s.Wait(t, 10*time.Second)
		if !strings.Contains(s.Stderr(), "resuming run "+runID) {
			t.Errorf("kill %d: the re-run did not resume run %s:\n%s", i+2, runID, s.Stderr())
		}
		if sv := f.storedVersions(t); !slices.Equal(sv, []string{"v1", "v2"}) {
			t.Fatalf("kill %d: storedVersions = %v, want [v1 v2] untouched", i+2, sv)
		}
		cp = f.checkpoint(t)
		if cp == nil || cp.RunID != runID || cp.Phase != "Migrating" || cp.Pages <= before.Pages || cp.Processed <= before.Processed {
			t.Fatalf("kill %d: checkpoint = %+v after %+v; want run %s further on", i+2, cp, before, runID)
		}
		t.Logf("kill %d (mid-page %v): %d pages, %d objects done", i+2, midPage, cp.Pages, cp.Processed)
	}

	r := f.run(t, "run", f.crdName, "--method", "client", "--qps", "1000", "--workers", "16", "-o", "json")
	if r.ExitCode != 0 {
		t.Fatalf("resumed run: want exit 0\n%s", r)
	}
	rep := parseRun(t, r).Items[0]
	if !rep.Resumed || rep.Processed != int64(f.objects) {
		t.Errorf("resumed run item = %+v, want resumed and %d processed", rep, f.objects)
	}
	if !strings.Contains(r.Stderr, "resuming run "+cp.RunID) {
		t.Errorf("stderr does not say it resumes run %s:\n%s", cp.RunID, r.Stderr)
	}
	f.assertAllAtV2(t)
}

// TestCRDMigrateAPIServerRestart restarts kube-apiserver in the middle of a
// run; the plugin retries and finishes.
func TestCRDMigrateAPIServerRestart(t *testing.T) {
	f := newFixture(t, "restart", 1600)
	s := f.start(t, "run", f.crdName, "--method", "client", "--qps", "100", "--burst", "1", "--workers", "4", "--retries", "12", "-o", "json")
	f.waitForPages(t, s, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	if err := f.cp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("apiserver restarted in %s", time.Since(began).Round(time.Millisecond))
	r := s.Wait(t, 3*time.Minute)
	if r.ExitCode != 0 {
		t.Fatalf("run across an apiserver restart: want exit 0\n%s", r)
	}
	if !strings.Contains(r.Stderr, "retry") {
		t.Errorf("stderr shows no retry; did the restart happen mid-run?\n%s", r.Stderr)
	}
	f.assertAllAtV2(t)
}

// TestCRDMigrateInTree migrates through the in-tree StorageVersionMigration
// API (storagemigration.k8s.io/v1 with its controller in
// kube-controller-manager), chosen by --method auto.
func TestCRDMigrateInTree(t *testing.T) {
	f := newFixture(t, "intree", 300)
	r := f.run(t, "run", f.crdName, "--method", "auto", "--in-tree-timeout", "60s", "-o", "json")
	if r.ExitCode != 0 {
		t.Fatalf("in-tree run: want exit 0\n%s", r)
	}
	rep := parseRun(t, r).Items[0]
	if rep.Method != "in-tree" || rep.Migration == "" || rep.Outcome != "done" {
		t.Errorf("in-tree run item = %+v", rep)
	}
	svm, err := f.cp.Client.StoragemigrationV1().StorageVersionMigrations().Get(context.Background(), rep.Migration, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	succeeded := false
	for _, c := range svm.Status.Conditions {
		if c.Type == "Succeeded" && c.Status == metav1.ConditionTrue {
			succeeded = true
		}
	}
	if !succeeded || svm.Spec.Resource.Group != f.group || svm.Spec.Resource.Resource != f.plural {
		t.Errorf("storageversionmigration %s = %+v", svm.Name, svm.Status)
	}
	t.Cleanup(func() {
		_ = f.cp.Client.StoragemigrationV1().StorageVersionMigrations().Delete(context.Background(), rep.Migration, metav1.DeleteOptions{})
	})
	f.assertAllAtV2(t)
}
