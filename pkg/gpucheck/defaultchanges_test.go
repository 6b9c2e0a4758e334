package gpucheck

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// configWith builds a configz map holding field (dotted) = value (JSON);
// an empty value leaves the field out.
func configWith(field, value string) map[string]any {
	cfg := map[string]any{"cpuManagerPolicy": "static"}
	if value == "" {
		return cfg
	}
	var v any
	if err := json.Unmarshal([]byte(value), &v); err != nil {
		panic(err)
	}
	parts := strings.Split(field, ".")
	m := cfg
	for _, p := range parts[:len(parts)-1] {
		n := map[string]any{}
		m[p] = n
		m = n
	}
	m[parts[len(parts)-1]] = v
	return cfg
}

func prevMinor(t *testing.T, minor string) string {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimPrefix(minor, "1."))
	if err != nil {
		t.Fatalf("since %q", minor)
	}
	return fmt.Sprintf("1.%d", n-1)
}

// TestDefaultChanges has one case per fact: across the release it names,
// the change is expected (with the fact's note); within that release the
// same difference is drift.
func TestDefaultChanges(t *testing.T) {
	for _, dc := range DefaultChanges {
		t.Run(dc.Field+"@"+dc.Since+"/"+dc.Old, func(t *testing.T) {
			if dc.Source == "" {
				t.Error("no source")
			}
			old, nw := configWith(dc.Field, dc.Old), configWith(dc.Field, dc.New)
			prev := prevMinor(t, dc.Since)
			diffs := DiffKubeletConfig(old, nw, "v"+prev+".4", "v"+dc.Since+".1")
			if len(diffs) != 1 || diffs[0].Field != dc.Field || diffs[0].Class != DriftExpected || diffs[0].Note != dc.Note {
				t.Errorf("%s -> %s: %+v", prev, dc.Since, diffs)
			}
			if fs := ConfigFindings("base", diffs); StatusOf(fs) != StatusPass {
				t.Errorf("%s -> %s fails: %+v", prev, dc.Since, fs)
			}
			// Inside the release the same difference is not a version
			// default.
			diffs = DiffKubeletConfig(old, nw, "v"+dc.Since+".0", "v"+dc.Since+".1")
			if len(diffs) != 1 || diffs[0].Note == dc.Note {
				t.Errorf("within %s: %+v", dc.Since, diffs)
			}
			if matchesField(dc.Field, GPURelevantFields) && diffs[0].Class != DriftGPU {
				t.Errorf("within %s: %+v", dc.Since, diffs)
			}
		})
	}
}

// TestUpgrade132To133 is the upgrade the issue reported: the 1.33 kubelet
// reports mergeDefaultEvictionSettings (a GPU-relevant field) and 1.32 did
// not, which failed a healthy node.
func TestUpgrade132To133(t *testing.T) {
	old := map[string]any{"evictionHard": map[string]any{"memory.available": "100Mi"}}
	nw := map[string]any{"evictionHard": map[string]any{"memory.available": "100Mi"}, "mergeDefaultEvictionSettings": false}
	if fs := ConfigFindings("b", DiffKubeletConfig(old, nw, "v1.32.9", "v1.33.1")); StatusOf(fs) != StatusPass {
		t.Errorf("%+v", fs)
	}
	diffs := DiffKubeletConfig(map[string]any{}, map[string]any{"podLogsDir": "/var/log/pods"}, "v1.29.9", "v1.30.0")
	if len(diffs) != 1 || diffs[0].Note != "new field in 1.30" {
		t.Errorf("podLogsDir 1.29 -> 1.30: %+v", diffs)
	}
}

// TestDefaultChangesAgainstKubeletTypes checks every FieldAdded fact
// against k8s.io/kubelet's config/v1beta1/types.go of the release and of
// the one before, read from the module cache when both are there
// (go mod download k8s.io/kubelet@v0.N.0 puts them there).
func TestDefaultChangesAgainstKubeletTypes(t *testing.T) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Skip("go env GOMODCACHE:", err)
	}
	cache := strings.TrimSpace(string(out))
	checked := 0
	for _, dc := range DefaultChanges {
		if !dc.FieldAdded {
			continue
		}
		top := strings.Split(dc.Field, ".")[0]
		has := func(minor string) (bool, bool) {
			b, err := os.ReadFile(filepath.Join(cache, "k8s.io", "kubelet@v0."+strings.TrimPrefix(minor, "1.")+".0", "config", "v1beta1", "types.go"))
			if err != nil {
				return false, false
			}
			s := string(b)
			i := strings.Index(s, "type KubeletConfiguration struct")
			j := strings.Index(s[i:], "\n}\n")
			return regexp.MustCompile(`json:"` + regexp.QuoteMeta(top) + `[,"]`).MatchString(s[i : i+j]), true
		}
		now, ok1 := has(dc.Since)
		before, ok2 := has(prevMinor(t, dc.Since))
		if !ok1 || !ok2 {
			t.Logf("%s: k8s.io/kubelet for %s and the release before not in the module cache; not checked", dc.Field, dc.Since)
			continue
		}
		checked++
		if !now || before {
			t.Errorf("%s: in types.go of %s: %v, of the release before: %v; the fact says it first appears in %s", dc.Field, dc.Since, now, before, dc.Since)
		}
	}
	if checked == 0 {
		t.Skip("no k8s.io/kubelet releases in the module cache")
	}
}
