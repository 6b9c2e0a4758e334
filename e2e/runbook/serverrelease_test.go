package runbooke2e

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// The sha256sum file of a k3s or RKE2 release lists its binaries with the
// sums of the bytes the lane serves for them; a release the world does
// not have, or an asset of another name, is no download.
func TestServerRelease(t *testing.T) {
	for _, tc := range []struct{ repo, dist, arch, asset string }{
		{"k3s-io/k3s", "k3s", "amd64", "k3s"},
		{"k3s-io/k3s", "k3s", "arm", "k3s-armhf"},
		{"rancher/rke2", "rke2", "arm64", "rke2.linux-arm64"},
	} {
		rel := kubeletVersion(tc.dist, Patch("1.36"))
		base := "/" + tc.repo + "/releases/download/" + rel + "/"
		sums, ok := serverRelease(base + "sha256sum-" + tc.arch + ".txt")
		bin, ok2 := serverRelease(base + tc.asset)
		if !ok || !ok2 {
			t.Fatalf("%s %s: not served", tc.repo, tc.asset)
		}
		sum := sha256.Sum256([]byte(bin))
		if !strings.Contains(sums, hex.EncodeToString(sum[:])+"  "+tc.asset+"\n") {
			t.Errorf("%s: %q does not list %s's sum", tc.repo, sums, tc.asset)
		}
	}
	for _, p := range []string{
		"/k3s-io/k3s/releases/download/v1.36.99+k3s1/k3s",
		"/k3s-io/k3s/releases/download/" + kubeletVersion("k3s", Patch("1.36")) + "/k3s.tar.gz",
		"/rancher/rke2/releases/download/" + kubeletVersion("k3s", Patch("1.36")) + "/rke2.linux-amd64",
	} {
		if _, ok := serverRelease(p); ok {
			t.Errorf("%s: served", p)
		}
	}
}
