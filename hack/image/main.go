// Command image builds the gpufleet-checkpoint-agent container image without
// Docker, with go-containerregistry: one layer holding the static binary
// and the files a non-root user needs, no shell, every timestamp fixed
// (SOURCE_DATE_EPOCH, else the Unix epoch), so that the same binary always
// gives the same image digest. It writes an OCI image layout, prints the
// digest, and pushes the image when -push names a reference.
//
//	go run ./hack/image -binary bin/linux_amd64/gpufleet-checkpoint-agent -out dist/image [-push REGISTRY/REPO:TAG]
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Fixed facts of the image.
const (
	// BinaryPath is where the agent lives and the entrypoint.
	BinaryPath = "/usr/local/bin/gpufleet-checkpoint-agent"
	// UID and GID of the non-root user (the "nonroot" id distroless uses);
	// numeric, so that the kubelet can verify runAsNonRoot.
	UID = 65532
	// User is the config's user.
	User = "65532:65532"
	// SharedDir is the agent's default --dir, owned by the user so the
	// image works without a volume too.
	SharedDir = "/var/run/gpufleet"
)

// Options of one build.
type Options struct {
	// Binary is the static linux binary of the agent.
	Binary []byte
	// OS and Arch of the binary.
	OS, Arch string
	// Created is every timestamp in the image.
	Created time.Time
	// Version goes into the org.opencontainers.image.version label.
	Version string
}

// Build returns the image.
func Build(o Options) (v1.Image, error) {
	layerTar, err := rootfs(o)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: o.Created}, CreatedBy: "hack/image: " + BinaryPath + " and /etc/passwd", Comment: "gpufleet-checkpoint-agent",
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = o.OS, o.Arch
	cf.Created = v1.Time{Time: o.Created}
	cf.Config = v1.Config{
		User:       User,
		Entrypoint: []string{BinaryPath},
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/bin"},
		Labels: map[string]string{
			"org.opencontainers.image.title":   "gpufleet-checkpoint-agent",
			"org.opencontainers.image.source":  "https://github.com/gpufleet/upgrade-plugins",
			"org.opencontainers.image.version": o.Version,
		},
	}
	return mutate.ConfigFile(img, cf)
}

// rootfs is the one layer: directories, /etc/passwd and /etc/group naming
// the user, the shared directory, and the binary. No shell, no libc.
func rootfs(o Options) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, uid int, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: o.Created, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: o.Created, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	uid := strconv.Itoa(UID)
	steps := []func() error{
		func() error { return dir("etc", 0, 0o755) },
		func() error {
			return file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:"+uid+":"+uid+":nonroot:/home/nonroot:/sbin/nologin\n"))
		},
		func() error { return file("etc/group", 0o644, []byte("root:x:0:\nnonroot:x:"+uid+":\n")) },
		func() error { return dir("home", 0, 0o755) },
		func() error { return dir("home/nonroot", UID, 0o700) },
		func() error { return dir("tmp", 0, 0o1777) },
		func() error { return dir("usr", 0, 0o755) },
		func() error { return dir("usr/local", 0, 0o755) },
		func() error { return dir("usr/local/bin", 0, 0o755) },
		func() error { return file(BinaryPath[1:], 0o755, o.Binary) },
		func() error { return dir("var", 0, 0o755) },
		func() error { return dir("var/run", 0, 0o755) },
		func() error { return dir(SharedDir[1:], UID, 0o755) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteLayout writes img as the only image of a fresh OCI layout in dir.
func WriteLayout(dir string, img v1.Image) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img)
}

// Push writes img to ref with the credentials of the docker config.
func Push(ref string, img v1.Image, opts ...remote.Option) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("-push %q: %w", ref, err)
	}
	opts = append([]remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	return r, remote.Write(r, img, opts...)
}

// created is SOURCE_DATE_EPOCH (reproducible-builds.org), else the epoch.
func created() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since the epoch", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

func main() {
	binary := flag.String("binary", "", "static linux binary of gpufleet-checkpoint-agent")
	out := flag.String("out", "dist/image", "OCI image layout directory to write (replaced)")
	push := flag.String("push", "", "reference to push to, e.g. ghcr.io/gpufleet/checkpoint-agent:v0.1.0 (none: do not push)")
	arch := flag.String("arch", "amd64", "architecture of the binary")
	version := flag.String("version", "dev", "version label")
	flag.Parse()
	if err := run(*binary, *out, *push, *arch, *version); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}

func run(binary, out, push, arch, version string) error {
	if binary == "" {
		return fmt.Errorf("-binary is required")
	}
	data, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	t, err := created()
	if err != nil {
		return err
	}
	img, err := Build(Options{Binary: data, OS: "linux", Arch: arch, Created: t, Version: version})
	if err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	if err := WriteLayout(out, img); err != nil {
		return fmt.Errorf("writing the OCI layout %s: %w", out, err)
	}
	fmt.Fprintf(os.Stderr, "wrote OCI image layout %s\n", out)
	if push != "" {
		ref, err := Push(push, img)
		if err != nil {
			return fmt.Errorf("pushing %s: %w", push, err)
		}
		fmt.Fprintf(os.Stderr, "pushed %s@%s\n", ref.Context(), d)
	}
	fmt.Println(d)
	return nil
}
