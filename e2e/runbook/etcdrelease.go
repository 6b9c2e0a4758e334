package runbooke2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"regexp"
	"time"
)

// EtcdRelease is the etcd the kubeadm scenarios' etcd static pods run
// (their image registry.k8s.io/etcd:EtcdRelease-0); the web stand-in
// serves this release's archives only.
const EtcdRelease = "3.6.5"

// etcdReleases are the etcd releases whose archives the web serves: the
// kubeadm scenarios' (EtcdRelease), and 3.7.1, whose etcdutl the k3s and
// RKE2 backups check their snapshot copy with (the runbook's etcd release
// for clusters whose embedded etcd no manifest names).
var etcdReleases = map[string]bool{EtcdRelease: true, "3.7.1": true}

// releaseAssetHost is where GitHub's release download URLs redirect.
const releaseAssetHost = "release-assets.githubusercontent.com"

var (
	// etcdAsset is a release asset of etcd-io/etcd for Linux, as its
	// release pages list them: etcd-vX.Y.Z-linux-ARCH.tar.gz.
	etcdAsset     = regexp.MustCompile(`^/etcd-io/etcd/releases/download/v(\d+\.\d+\.\d+)/etcd-v(\d+\.\d+\.\d+)-linux-(amd64|arm64)\.tar\.gz$`)
	etcdAssetFile = regexp.MustCompile(`^/etcd-io/etcd/etcd-v(\d+\.\d+\.\d+)-linux-(amd64|arm64)\.tar\.gz$`)
)

// fakeEtcdutl stands in for etcdutl in the release archive: what the
// runbook runs on the workstation, version and snapshot status, with
// etcdutl's output shapes (etcd v3.6 etcdutl/ctl.go: "etcdutl version:",
// "API version:"; snapshot status -w table's columns). It checks the
// snapshot file is there and not empty; everything else is refused.
const fakeEtcdutl = `#!/bin/sh
# etcdutl stand-in of the runbook lane (etcd v%[1]s)
case "$1 $2" in
"version "*) echo "etcdutl version: %[1]s"; echo "API version: %[2]s"; exit 0;;
"snapshot status")
  if [ ! -s "$3" ]; then echo "Error: stat $3: no such file or directory" >&2; exit 1; fi
  echo "+----------+----------+------------+------------+---------+"
  echo "|   HASH   | REVISION | TOTAL KEYS | TOTAL SIZE | VERSION |"
  echo "+----------+----------+------------+------------+---------+"
  echo "| 7d3f1c2a |     4821 |        973 |     4.1 MB |   3.6.0 |"
  echo "+----------+----------+------------+------------+---------+"
  exit 0;;
esac
echo "runbook lane: etcdutl $* is not simulated" >&2
exit 1
`

// etcdArchive is the release archive etcd-vVER-linux-ARCH.tar.gz: a
// directory etcd-vVER-linux-ARCH holding etcd, etcdctl, etcdutl and the
// docs, as etcd's release script packs it (scripts/release.sh).
func etcdArchive(ver, arch string) ([]byte, error) {
	dir := fmt.Sprintf("etcd-v%s-linux-%s", ver, arch)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	now := time.Now().Add(-24 * time.Hour) // a release packed before it is fetched
	files := []struct {
		name string
		mode int64
		body string
	}{
		{"README.md", 0o644, "# etcd\n"},
		{"etcd", 0o755, "#!/bin/sh\necho 'runbook lane: etcd is not simulated' >&2\nexit 1\n"},
		{"etcdctl", 0o755, "#!/bin/sh\necho 'runbook lane: etcdctl is not simulated' >&2\nexit 1\n"},
		{"etcdutl", 0o755, fmt.Sprintf(fakeEtcdutl, ver, Minor(ver))},
	}
	if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: now}); err != nil {
		return nil, err
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: dir + "/" + f.name, Typeflag: tar.TypeReg, Mode: f.mode, Size: int64(len(f.body)), ModTime: now}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
