package runbooke2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// serverAsset is a k3s or RKE2 release's download the runbook's backup
// reads to keep each server's own release: the sha256sum file of an
// architecture and the server binary it lists (k3s: k3s, k3s-arm64,
// k3s-armhf in sha256sum-{amd64,arm64,arm}.txt, as k3s's install.sh
// download_hash reads them; RKE2: rke2.linux-{amd64,arm64} in
// sha256sum-{amd64,arm64}.txt, rancher/rke2 scripts/package-binary and
// scripts/checksum).
var serverAsset = regexp.MustCompile(`^/(k3s-io/k3s|rancher/rke2)/releases/download/(v(\d+\.\d+)\.\d+\+(?:k3s1|rke2r1))/(sha256sum-(amd64|arm64|arm)\.txt|k3s|k3s-arm64|k3s-armhf|rke2\.linux-amd64|rke2\.linux-arm64)$`)

// serverAssets are the server binaries a sha256sum file of an
// architecture lists.
func serverAssets(repo, arch string) []string {
	if repo == "k3s-io/k3s" {
		return map[string][]string{"amd64": {"k3s"}, "arm64": {"k3s-arm64"}, "arm": {"k3s-armhf"}}[arch]
	}
	if arch == "arm" {
		return nil
	}
	return []string{"rke2.linux-" + arch}
}

// serverRelease answers a k3s or RKE2 release download of a release the
// lane's world has (the patch Patch gives its minor): a binary's bytes
// name what it is; the sha256sum file lists each binary of its
// architecture with its sum. ok is false for any other download.
func serverRelease(p string) (body string, ok bool) {
	m := serverAsset.FindStringSubmatch(p)
	if m == nil {
		return "", false
	}
	repo, rel, minor, file, arch := m[1], m[2], m[3], m[4], m[5]
	dist := map[string]string{"k3s-io/k3s": "k3s", "rancher/rke2": "rke2"}[repo]
	if _, known := patches[minor]; !known || rel != kubeletVersion(dist, Patch(minor)) {
		return "", false
	}
	binary := func(asset string) string {
		return fmt.Sprintf("#!/bin/sh\n# %s %s %s (the runbook lane's release)\n", dist, rel, asset)
	}
	if !strings.HasPrefix(file, "sha256sum-") {
		return binary(file), true
	}
	var b strings.Builder
	for _, a := range serverAssets(repo, arch) {
		sum := sha256.Sum256([]byte(binary(a)))
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), a)
	}
	return b.String(), b.Len() > 0
}
