package deprecations

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDisplayPaths(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a/x", "a/y", "b"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "a", "x", "app.yaml")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		file string
		want string
	}{
		{[]string{filepath.Join(dir, "a")}, file, filepath.Join("x", "app.yaml")},
		{[]string{filepath.Join(dir, "a") + "/"}, file, filepath.Join("x", "app.yaml")},
		{[]string{file}, file, "app.yaml"},
		{[]string{filepath.Join(dir, "a", "x"), filepath.Join(dir, "a", "y")}, file, filepath.Join("x", "app.yaml")},
		{[]string{filepath.Join(dir, "a"), filepath.Join(dir, "b")}, file, filepath.Join("a", "x", "app.yaml")},
		{[]string{"-"}, "<stdin>", "<stdin>"},
		{[]string{filepath.Join(dir, "b")}, file, file}, // not under the argument
		{[]string{"."}, "deploy/app.yaml", "deploy/app.yaml"},
	} {
		base := DisplayBase(tc.args)
		if got := RelativePath(base, tc.file); got != tc.want {
			t.Errorf("%v: %s shows as %q (base %q), want %q", tc.args, tc.file, got, base, tc.want)
		}
	}
	f := Finding{File: file, Line: 3, Location: file + ":3"}
	if got := f.DisplayLocation(filepath.Join(dir, "a")); got != filepath.Join("x", "app.yaml")+":3" {
		t.Errorf("location %q", got)
	}
	if got := (Finding{Namespace: "ns", Name: "n"}).ObjectName(); got != "ns/n" {
		t.Errorf("name %q", got)
	}
	if got := (Finding{Name: "n"}).ObjectName(); got != "n" {
		t.Errorf("name %q", got)
	}
}
