package deprecations

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// DefaultMaxRelease bounds the decompressed size of one Helm release record.
const DefaultMaxRelease = 64 << 20

// HelmRelease is what a Helm release record says about the objects it
// installed. Values, chart files and secret data are never decoded.
type HelmRelease struct {
	Name         string
	Namespace    string
	Revision     int
	Status       string
	Chart        string
	ChartVersion string
	// AppVersion is the chart's appVersion (the version of what it
	// installs, which many charts number apart from the chart).
	AppVersion string
	// Manifests are the rendered manifest and the hook manifests.
	Manifests []string
}

type helmRecord struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Version   int    `json:"version"`
	Info      struct {
		Status string `json:"status"`
	} `json:"info"`
	Chart struct {
		Metadata struct {
			Name       string `json:"name"`
			Version    string `json:"version"`
			AppVersion string `json:"appVersion"`
		} `json:"metadata"`
	} `json:"chart"`
	Manifest string `json:"manifest"`
	Hooks    []struct {
		Manifest string `json:"manifest"`
	} `json:"hooks"`
}

var gzipMagic = []byte{0x1f, 0x8b}

// DecodeRelease decodes a Helm 3 release record as Helm stores it in the
// "release" key of a Secret or ConfigMap: base64 text of JSON, usually
// gzipped. The decompressed size is bounded by max (DefaultMaxRelease when
// max <= 0).
func DecodeRelease(stored []byte, max int64) (HelmRelease, error) {
	if max <= 0 {
		max = DefaultMaxRelease
	}
	dec := base64.NewDecoder(base64.StdEncoding, bytes.NewReader(bytes.TrimSpace(stored)))
	br := bufio.NewReader(dec)
	var r io.Reader = br
	magic, err := br.Peek(2)
	if err != nil {
		return HelmRelease{}, fmt.Errorf("release record is not base64 or is empty: %w", err)
	}
	if bytes.Equal(magic, gzipMagic) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return HelmRelease{}, fmt.Errorf("release record is not valid gzip: %w", err)
		}
		defer zr.Close()
		r = zr
	}
	lr := &io.LimitedReader{R: r, N: max + 1}
	var rec helmRecord
	if err := json.NewDecoder(lr).Decode(&rec); err != nil {
		if lr.N <= 0 {
			return HelmRelease{}, fmt.Errorf("release record decompresses to more than %d bytes", max)
		}
		var se *json.SyntaxError
		if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return HelmRelease{}, fmt.Errorf("release record is not valid JSON: %v", err)
		}
		return HelmRelease{}, fmt.Errorf("release record cannot be read: %v", err)
	}
	if lr.N <= 0 {
		return HelmRelease{}, fmt.Errorf("release record decompresses to more than %d bytes", max)
	}
	rel := HelmRelease{
		Name: rec.Name, Namespace: rec.Namespace, Revision: rec.Version, Status: rec.Info.Status,
		Chart: rec.Chart.Metadata.Name, ChartVersion: rec.Chart.Metadata.Version, AppVersion: rec.Chart.Metadata.AppVersion,
	}
	if rec.Manifest != "" {
		rel.Manifests = append(rel.Manifests, rec.Manifest)
	}
	for _, h := range rec.Hooks {
		if strings.TrimSpace(h.Manifest) != "" {
			rel.Manifests = append(rel.Manifests, h.Manifest)
		}
	}
	return rel, nil
}

// DecodeReleaseData decodes a release record as it appears in a Secret
// manifest's data (base64 of the stored text, so base64 twice).
func DecodeReleaseData(data string, max int64) (HelmRelease, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(data))
	if err != nil {
		return HelmRelease{}, fmt.Errorf("secret data is not base64: %w", err)
	}
	return DecodeRelease(raw, max)
}

// releaseLocation names a release and revision for reports.
func releaseLocation(ns, name string, rev int) string {
	return fmt.Sprintf("release %s/%s revision %d", ns, name, rev)
}
