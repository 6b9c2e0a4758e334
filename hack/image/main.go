// Command image builds the suite's container image without Docker, with
// go-containerregistry: an OCI image index with one image per architecture
// (linux/amd64 and linux/arm64), each one layer holding the six plugins, the
// checkpoint agent and the files a non-root user needs, no shell, tar entries
// sorted by name and every timestamp fixed (SOURCE_DATE_EPOCH, else the Unix
// epoch), so that the same binaries always give the same index digest. The
// entrypoint is the checkpoint agent, as in the agent's own image before;
// a workflow step sets its command (kubectl-skew). It writes an OCI image
// layout, prints the index digest, and pushes the index when -push names a
// reference.
//
//	go run ./hack/image -bin-dir dist/image-build -arch amd64,arm64 -out dist/image [-push REGISTRY/REPO:TAG]
//
// where -bin-dir holds linux_<arch>/ directories of static binaries.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
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
	// BinDir holds every binary of the suite (the image's PATH).
	BinDir = "/usr/local/bin"
	// Agent is the checkpoint agent's binary, the entrypoint.
	Agent = "gpufleet-checkpoint-agent"
	// BinaryPath is where the agent lives and the entrypoint.
	BinaryPath = BinDir + "/" + Agent
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
	// Binaries are the static linux binaries by name (the six plugins and
	// Agent, which must be there).
	Binaries map[string][]byte
	// OS and Arch of the binary.
	OS, Arch string
	// Created is every timestamp in the image.
	Created time.Time
	// Version goes into the org.opencontainers.image.version label.
	Version string
}

// Build returns the image.
func Build(o Options) (v1.Image, error) {
	if _, ok := o.Binaries[Agent]; !ok {
		return nil, fmt.Errorf("linux/%s: no %s among the binaries", o.Arch, Agent)
	}
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
		Created: v1.Time{Time: o.Created}, CreatedBy: "hack/image: " + BinDir + "/" + strings.Join(names(o.Binaries), ",") + " and /etc/passwd", Comment: "gpufleet suite",
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
		Env:        []string{"PATH=" + BinDir},
		Labels: map[string]string{
			"org.opencontainers.image.title":   "gpufleet suite (kubectl plugins and checkpoint agent)",
			"org.opencontainers.image.source":  "https://github.com/gpufleet/upgrade-plugins",
			"org.opencontainers.image.version": o.Version,
		},
	}
	return mutate.ConfigFile(img, cf)
}

// rootfs is the one layer: directories, /etc/passwd and /etc/group naming
// the user, the shared directory, and the binaries. No shell, no libc.
// Entries are sorted by name (a directory sorts before what it holds).
func rootfs(o Options) ([]byte, error) {
	type entry struct {
		h    tar.Header
		data []byte
	}
	var entries []entry
	dir := func(name string, uid int, mode int64) {
		entries = append(entries, entry{h: tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid}})
	}
	file := func(name string, mode int64, data []byte) {
		entries = append(entries, entry{h: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}, data: data})
	}
	uid := strconv.Itoa(UID)
	dir("etc", 0, 0o755)
	file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:"+uid+":"+uid+":nonroot:/home/nonroot:/sbin/nologin\n"))
	file("etc/group", 0o644, []byte("root:x:0:\nnonroot:x:"+uid+":\n"))
	dir("home", 0, 0o755)
	dir("home/nonroot", UID, 0o700)
	dir("tmp", 0, 0o1777)
	dir("usr", 0, 0o755)
	dir("usr/local", 0, 0o755)
	dir(BinDir[1:], 0, 0o755)
	for _, n := range names(o.Binaries) {
		file(BinDir[1:]+"/"+n, 0o755, o.Binaries[n])
	}
	dir("var", 0, 0o755)
	dir("var/run", 0, 0o755)
	dir(SharedDir[1:], UID, 0o755)
	sort.Slice(entries, func(i, j int) bool { return entries[i].h.Name < entries[j].h.Name })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.h
		h.ModTime, h.Format = o.Created, tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// names are the keys of m, sorted.
func names(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// BuildIndex returns the multi-arch image: an OCI image index with one
// image per architecture of perArch (arch -> binaries by name), in
// architecture order, each entry carrying its platform.
func BuildIndex(created time.Time, version string, perArch map[string]map[string][]byte) (v1.ImageIndex, error) {
	arches := make([]string, 0, len(perArch))
	for a := range perArch {
		arches = append(arches, a)
	}
	sort.Strings(arches)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var want []string
	for _, arch := range arches {
		got := names(perArch[arch])
		if want == nil {
			want = got
		} else if strings.Join(got, ",") != strings.Join(want, ",") {
			return nil, fmt.Errorf("linux/%s has binaries %v, linux/%s has %v: every architecture needs the same set", arch, got, arches[0], want)
		}
		img, err := Build(Options{Binaries: perArch[arch], OS: "linux", Arch: arch, Created: created, Version: version})
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Platform:  &v1.Platform{OS: "linux", Architecture: arch},
		}})
	}
	return idx, nil
}

// WriteLayout writes idx as the only entry of a fresh OCI layout in dir.
func WriteLayout(dir string, idx v1.ImageIndex) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx)
}

// Push writes idx to ref with the credentials of the docker config.
func Push(ref string, idx v1.ImageIndex, opts ...remote.Option) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("-push %q: %w", ref, err)
	}
	opts = append([]remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	return r, remote.WriteIndex(r, idx, opts...)
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
	binDir := flag.String("bin-dir", "dist/image-build", "directory holding linux_<arch>/ directories of the static binaries")
	out := flag.String("out", "dist/image", "OCI image layout directory to write (replaced)")
	push := flag.String("push", "", "reference to push to, e.g. ghcr.io/gpufleet/suite:v0.1.0 (none: do not push)")
	arch := flag.String("arch", "amd64,arm64", "architectures, comma-separated")
	version := flag.String("version", "dev", "version label")
	flag.Parse()
	if err := run(*binDir, *out, *push, *arch, *version); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}

// readBinaries reads every regular file of dir.
func readBinaries(dir string) (map[string][]byte, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	m := map[string][]byte{}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		m[e.Name()] = b
	}
	return m, nil
}

func run(binDir, out, push, arches, version string) error {
	perArch := map[string]map[string][]byte{}
	for _, a := range strings.Split(arches, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		m, err := readBinaries(filepath.Join(binDir, "linux_"+a))
		if err != nil {
			return err
		}
		perArch[a] = m
	}
	if len(perArch) == 0 {
		return fmt.Errorf("-arch names no architecture")
	}
	t, err := created()
	if err != nil {
		return err
	}
	idx, err := BuildIndex(t, version, perArch)
	if err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	if err := WriteLayout(out, idx); err != nil {
		return fmt.Errorf("writing the OCI layout %s: %w", out, err)
	}
	fmt.Fprintf(os.Stderr, "wrote OCI image layout %s (index of %d images)\n", out, len(perArch))
	if push != "" {
		ref, err := Push(push, idx)
		if err != nil {
			return fmt.Errorf("pushing %s: %w", push, err)
		}
		fmt.Fprintf(os.Stderr, "pushed %s@%s\n", ref.Context(), d)
	}
	fmt.Println(d)
	return nil
}
