package skew

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in      string
		want    Version
		str     string
		wantErr bool
	}{
		{in: "v1.30.2-gke.1587003", want: Version{Major: 1, Minor: 30, Patch: 2, HasPatch: true, Pre: "gke.1587003"}, str: "v1.30.2-gke.1587003"},
		{in: "v1.29.3-eks-ab12cd3", want: Version{Major: 1, Minor: 29, Patch: 3, HasPatch: true, Pre: "eks-ab12cd3"}, str: "v1.29.3-eks-ab12cd3"},
		{in: "v1.28.5+k3s1", want: Version{Major: 1, Minor: 28, Patch: 5, HasPatch: true, Build: "k3s1"}, str: "v1.28.5+k3s1"},
		{in: "v1.31.0-rc.1", want: Version{Major: 1, Minor: 31, HasPatch: true, Pre: "rc.1"}, str: "v1.31.0-rc.1"},
		{in: "1.37", want: Version{Major: 1, Minor: 37}, str: "v1.37"},
		{in: " v1.37.2 ", want: Version{Major: 1, Minor: 37, Patch: 2, HasPatch: true}, str: "v1.37.2"},
		{in: "v1.32.1-eks-5e0fdde+extra", want: Version{Major: 1, Minor: 32, Patch: 1, HasPatch: true, Pre: "eks-5e0fdde", Build: "extra"}, str: "v1.32.1-eks-5e0fdde+extra"},
		{in: "", wantErr: true},
		{in: "v", wantErr: true},
		{in: "kwok-v0.8.0", wantErr: true},
		{in: "v1", wantErr: true},
		{in: "v1.x.3", wantErr: true},
		{in: "v1.2.3.4", wantErr: true},
		{in: "v1.-2.3", wantErr: true},
		{in: "v1..3", wantErr: true},
		{in: "v99999999999999999999.1", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseVersion(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			if got.String() != tc.str {
				t.Errorf("String() = %q, want %q", got.String(), tc.str)
			}
		})
	}
}

func TestVersionCompareAndSkew(t *testing.T) {
	tests := []struct {
		a, b  string
		cmp   int
		after int
	}{
		{"v1.31.0-rc.1", "v1.31.0", -1, 0},
		{"v1.31.0-gke.1", "v1.31.0", 0, 0},
		{"v1.30.2", "v1.30.10", -1, 0},
		{"v1.37.2", "v1.33.9", 1, 4},
		{"v1.24.3", "v1.26.0", -1, -2},
		{"v2.0.0", "v1.40.0", 1, 960},
	}
	for _, tc := range tests {
		a, b := MustParseVersion(tc.a), MustParseVersion(tc.b)
		if got := a.Compare(b); got != tc.cmp {
			t.Errorf("%s.Compare(%s) = %d, want %d", tc.a, tc.b, got, tc.cmp)
		}
		if got := a.MinorsAfter(b); got != tc.after {
			t.Errorf("%s.MinorsAfter(%s) = %d, want %d", tc.a, tc.b, got, tc.after)
		}
	}
}

func TestImageTag(t *testing.T) {
	tests := map[string]string{
		"registry.k8s.io/kube-apiserver:v1.37.2":         "v1.37.2",
		"registry.k8s.io/kube-proxy:v1.37.2@sha256:abcd": "v1.37.2",
		"localhost:5000/kube-proxy":                      "",
		"localhost:5000/kube-proxy:v1.30.2-eksbuild.1":   "v1.30.2-eksbuild.1",
		"registry.k8s.io/coredns/coredns:v1.11.3":        "v1.11.3",
		"kube-proxy@sha256:0123":                         "",
		"":                                               "",
		"602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/kube-proxy:v1.29.0-minimal-eksbuild.1": "v1.29.0-minimal-eksbuild.1",
	}
	for in, want := range tests {
		if got := ImageTag(in); got != want {
			t.Errorf("ImageTag(%q) = %q, want %q", in, got, want)
		}
	}
	if _, err := ImageVersion("kube-proxy@sha256:0123"); err == nil {
		t.Error("ImageVersion without a tag: want an error")
	}
}
