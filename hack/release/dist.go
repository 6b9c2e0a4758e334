package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// epoch is the fixed modification time inside archives, so the same inputs
// always give the same bytes.
var epoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

type archiveFile struct {
	name string
	mode int64
	data []byte
}

func runDist(args []string) error {
	fs := flag.NewFlagSet("dist", flag.ContinueOnError)
	version := fs.String("version", "", "release version (semver with a leading v)")
	build := fs.String("build", "dist/build", "directory with <os>_<arch>/ binaries")
	out := fs.String("out", "dist", "output directory")
	license := fs.String("license", "LICENSE", "licence file to ship")
	completions := fs.String("completions", "hack/completion", "directory with kubectl_complete-* scripts")
	platforms := fs.String("platforms", "", "comma-separated os/arch list (default: every release platform)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	plats, err := selectPlatforms(*platforms)
	if err != nil {
		return err
	}
	if err := checkVersion(*version); err != nil {
		return err
	}
	lic, err := os.ReadFile(*license)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for _, pl := range Plugins {
		comp, err := os.ReadFile(filepath.Join(*completions, pl.Completion()))
		if err != nil {
			return err
		}
		for _, p := range plats {
			bin, err := os.ReadFile(filepath.Join(*build, p.OS+"_"+p.Arch, pl.Binary()+p.Exe()))
			if err != nil {
				return err
			}
			files := []archiveFile{
				{pl.Binary() + p.Exe(), 0o755, bin},
				{"LICENSE", 0o644, lic},
			}
			if c := p.Completion(pl); c != "" {
				files = append(files, archiveFile{c, 0o755, comp})
			}
			data, err := archive(p, files)
			if err != nil {
				return err
			}
			path := filepath.Join(*out, ArchiveName(pl, *version, p))
			if err := os.WriteFile(path, data, 0o644); err != nil {
				return err
			}
			fmt.Println(path)
		}
	}
	return nil
}

func archive(p Platform, files []archiveFile) ([]byte, error) {
	if p.OS == "windows" {
		return zipArchive(files)
	}
	return tarGz(files)
}

func tarGz(files []archiveFile) ([]byte, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	gz.ModTime = epoch
	tw := tar.NewWriter(gz)
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
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

func zipArchive(files []archiveFile) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		hdr := &zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: epoch}
		hdr.SetMode(os.FileMode(f.mode))
		w, err := zw.CreateHeader(hdr)
		if err != nil {
			return nil, err
		}
		if _, err := io.Copy(w, bytes.NewReader(f.data)); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
