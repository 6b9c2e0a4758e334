package gpucheck

import "testing"

// A runbook gates a pool on the minor it planned: --kubelet-version v1.38
// passes any 1.38 patch, vendor builds included, and nothing else.
func TestKubeletIs(t *testing.T) {
	for _, tc := range []struct {
		have, want string
		ok         bool
	}{
		{"v1.38.2", "v1.38", true},
		{"v1.38.2-eks-113cf36", "v1.38", true},
		{"v1.38.0+k3s1", "1.38", true},
		{"v1.37.9", "v1.38", false},
		{"v1.380.1", "v1.38", false},
		{"v1.38.2", "v1.38.2", true},
		{"v1.38.2", "v1.38.1", false},
	} {
		if got := KubeletIs(tc.have, tc.want); got != tc.ok {
			t.Errorf("KubeletIs(%s, %s) = %v, want %v", tc.have, tc.want, got, tc.ok)
		}
	}
}
