package readme

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// rbacRow is a row of README's RBAC table: `| plugin | `FILE` | N: ClusterRole
// A, Role ... B | needs |`.
var rbacRow = regexp.MustCompile("^\\| [^|]+ \\| `(deploy/rbac/[^`]+)` \\| ([^|]+) \\|")

// rbacKindCount is one "ClusterRole 11" or "Role in kube-system 1" of a row's
// rules column.
var rbacKindCount = regexp.MustCompile(`\b(ClusterRole|Role)\b[^,(\d]*?(\d+)`)

// TestRBACTableMatchesFiles holds README's RBAC table to the shipped files:
// the rules column of each row gives the total and the count per kind, and
// each must be what the file holds, so a rule added to a role cannot leave
// the table behind.
func TestRBACTableMatchesFiles(t *testing.T) {
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		m := rbacRow.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		rows++
		file, col := m[1], strings.TrimSpace(m[2])
		total, rest, ok := strings.Cut(col, ":")
		want, err := strconv.Atoi(total)
		if !ok || err != nil {
			t.Errorf("README.md:%d: rules column %q does not open with \"N:\"", n, col)
			continue
		}
		wantKind := map[string]int{}
		for _, k := range rbacKindCount.FindAllStringSubmatch(rest, -1) {
			c, _ := strconv.Atoi(k[2])
			wantKind[k[1]] += c
		}
		got, gotKind := rulesIn(t, filepath.Join("../..", file))
		if got != want {
			t.Errorf("README.md:%d: %s has %d rules, the table says %d", n, file, got, want)
		}
		for _, kind := range []string{"ClusterRole", "Role"} {
			if gotKind[kind] != wantKind[kind] {
				t.Errorf("README.md:%d: %s has %d %s rules, the table says %d", n, file, gotKind[kind], kind, wantKind[kind])
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if rows < 10 {
		t.Fatalf("found %d RBAC table rows in README.md; the row pattern is broken", rows)
	}
}

// rulesIn counts the rules of the Roles and ClusterRoles in a manifest, in
// all and per kind.
func rulesIn(t *testing.T, path string) (int, map[string]int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	total, per := 0, map[string]int{}
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var obj struct {
			Kind  string              `json:"kind"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if obj.Kind == "ClusterRole" || obj.Kind == "Role" {
			total += len(obj.Rules)
			per[obj.Kind] += len(obj.Rules)
		}
	}
	return total, per
}
