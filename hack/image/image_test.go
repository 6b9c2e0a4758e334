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
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func opts(binary string) Options {
	return Options{Binary: []byte(binary), OS: "linux", Arch: "amd64", Created: time.Unix(0, 0).UTC(), Version: "v0.1.0"}
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
	a, err := Build(opts("\x7fELF agent"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(opts("\x7fELF agent"))
	if err != nil {
		t.Fatal(err)
	}
	if digest(t, a) != digest(t, b) {
		t.Errorf("two builds of the same binary: %s and %s", digest(t, a), digest(t, b))
	}
	c, _ := Build(opts("\x7fELF other"))
	if digest(t, a) == digest(t, c) {
		t.Error("another binary gives the same digest")
	}
	// The layout on disk holds the same image.
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
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Digest != digest(t, a) || m.Manifests[0].MediaType != types.OCIManifestSchema1 {
		t.Errorf("layout index %+v", m.Manifests)
	}
}

// TestPushPullBack pushes to go-containerregistry's in-process registry,
// pulls the image back and checks what a kubelet would run.
func TestPushPullBack(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	img, err := Build(opts("\x7fELF agent"))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := Push(u.Host+"/gpufleet/checkpoint-agent:test", img)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	if digest(t, got) != digest(t, img) {
		t.Errorf("pulled %s, pushed %s", digest(t, got), digest(t, img))
	}
	byDigest, _ := name.NewDigest(ref.Context().String() + "@" + digest(t, img).String())
	if _, err := remote.Image(byDigest); err != nil {
		t.Errorf("pull by digest: %v", err)
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
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
		if !h.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("%s: mtime %v", h.Name, h.ModTime)
		}
		if "/"+h.Name == BinaryPath {
			bin, _ = io.ReadAll(tr)
		}
	}
	if string(bin) != "\x7fELF agent" || files[BinaryPath[1:]].Mode != 0o755 {
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
