package main

import (
	"archive/tar"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// suite is fake binaries of the suite for one arch (the layering is what
// is tested, not the binaries).
func suite(agent string) map[string][]byte {
	m := map[string][]byte{Agent: []byte(agent)}
	for _, n := range []string{"kubectl-skew", "kubectl-deprecations", "kubectl-gang_drain", "kubectl-gpu_validate", "kubectl-pdb_blockers", "kubectl-crd_migrate"} {
		m[n] = []byte("\x7fELF " + n)
	}
	return m
}

func index(t *testing.T, agent string) v1.ImageIndex {
	t.Helper()
	idx, err := BuildIndex(time.Unix(0, 0).UTC(), "v0.1.0", map[string]map[string][]byte{"amd64": suite(agent + " amd64"), "arm64": suite(agent + " arm64")})
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func indexDigest(t *testing.T, idx v1.ImageIndex) v1.Hash {
	t.Helper()
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func digest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestBuildIsReproducible(t *testing.T) {
	a, b := index(t, "\x7fELF agent"), index(t, "\x7fELF agent")
	if indexDigest(t, a) != indexDigest(t, b) {
		t.Errorf("two builds of the same binaries: %s and %s", indexDigest(t, a), indexDigest(t, b))
	}
	if c := index(t, "\x7fELF other"); indexDigest(t, a) == indexDigest(t, c) {
		t.Error("other binaries give the same digest")
	}
	m, err := a.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if mt, _ := a.MediaType(); mt != types.OCIImageIndex {
		t.Errorf("index media type %s", mt)
	}
	var plats []string
	for _, d := range m.Manifests {
		if d.Platform == nil || d.MediaType != types.OCIManifestSchema1 {
			t.Fatalf("entry %+v", d)
		}
		plats = append(plats, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := a.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil || cf.Architecture != d.Platform.Architecture {
			t.Errorf("%s: config arch %v, %v", d.Digest, cf, err)
		}
	}
	if strings.Join(plats, " ") != "linux/amd64 linux/arm64" {
		t.Errorf("platforms %v, want linux/amd64 linux/arm64", plats)
	}
	// The layout on disk holds the same index.
	dir := filepath.Join(t.TempDir(), "oci")
	for i := 0; i < 2; i++ { // writing twice replaces the layout
		if err := WriteLayout(dir, a); err != nil {
			t.Fatal(err)
		}
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	li, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	lm, err := li.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(lm.Manifests) != 1 || lm.Manifests[0].Digest != indexDigest(t, a) || lm.Manifests[0].MediaType != types.OCIImageIndex {
		t.Errorf("layout index %+v", lm.Manifests)
	}
}

func TestBuildIndexRefusesMismatchedArches(t *testing.T) {
	arm := suite("agent")
	delete(arm, "kubectl-skew")
	if _, err := BuildIndex(time.Unix(0, 0), "v", map[string]map[string][]byte{"amd64": suite("agent"), "arm64": arm}); err == nil || !strings.Contains(err.Error(), "same set") {
		t.Errorf("want a mismatch error, got %v", err)
	}
	if _, err := Build(Options{Binaries: map[string][]byte{"kubectl-skew": nil}, Arch: "amd64"}); err == nil {
		t.Error("an image without the agent: want an error")
	}
}

// TestPushPullBack pushes to go-containerregistry's in-process registry,
// pulls the image back and checks what a kubelet would run.
func TestPushPullBack(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	idx := index(t, "\x7fELF agent")
	ref, err := Push(u.Host+"/gpufleet/suite:test", idx)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	if indexDigest(t, pulled) != indexDigest(t, idx) {
		t.Errorf("pulled index %s, pushed %s", indexDigest(t, pulled), indexDigest(t, idx))
	}
	// What a kubelet on an amd64 node pulls by the index's digest.
	byIndex, _ := name.NewDigest(ref.Context().String() + "@" + indexDigest(t, idx).String())
	got, err := remote.Image(byIndex, remote.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"}))
	if err != nil {
		t.Fatal(err)
	}
	img, err := Build(Options{Binaries: suite("\x7fELF agent amd64"), OS: "linux", Arch: "amd64", Created: time.Unix(0, 0).UTC(), Version: "v0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if digest(t, got) != digest(t, img) {
		t.Errorf("pulled %s, built %s", digest(t, got), digest(t, img))
	}
	cf, err := got.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != BinaryPath || cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("config %+v", cf.Config)
	}
	if !cf.Created.Time.Equal(time.Unix(0, 0)) || cf.History[0].Created.Time.Unix() != 0 {
		t.Errorf("timestamps not fixed: created %v history %+v", cf.Created, cf.History)
	}
	mt, _ := got.MediaType()
	if mt != types.OCIManifestSchema1 {
		t.Errorf("media type %s", mt)
	}
	layers, err := got.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]*tar.Header{}
	var bin []byte
	var order []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
		order = append(order, h.Name)
		if !h.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("%s: mtime %v", h.Name, h.ModTime)
		}
		if "/"+h.Name == BinaryPath {
			bin, _ = io.ReadAll(tr)
		}
	}
	if !sort.StringsAreSorted(order) {
		t.Errorf("tar entries not sorted: %v", order)
	}
	for _, n := range []string{"kubectl-skew", "kubectl-deprecations", "kubectl-gang_drain", "kubectl-gpu_validate", "kubectl-pdb_blockers", "kubectl-crd_migrate"} {
		if h := files[BinDir[1:]+"/"+n]; h == nil || h.Mode != 0o755 {
			t.Errorf("%s: %+v", n, h)
		}
	}
	if string(bin) != "\x7fELF agent amd64" || files[BinaryPath[1:]].Mode != 0o755 {
		t.Errorf("binary %q mode %o", bin, files[BinaryPath[1:]].Mode)
	}
	for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox", "usr/bin/sh"} {
		if files[shell] != nil {
			t.Errorf("the image has a shell: %s", shell)
		}
	}
	if h := files["var/run/gpufleet/"]; h == nil || h.Uid != UID {
		t.Errorf("shared dir %+v", h)
	}
}

func TestCreatedFromSourceDateEpoch(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	if c, err := created(); err != nil || c.Unix() != 1700000000 {
		t.Errorf("%v %v", c, err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, err := created(); err == nil {
		t.Error("want an error")
	}
	os.Unsetenv("SOURCE_DATE_EPOCH")
}
