// Package apilifecycle owns the Kubernetes API lifecycle table: for every
// prerelease API kind, the release it was introduced, deprecated and removed
// in, and its replacement. The built-in table is generated (go generate)
// from the prerelease-lifecycle markers of k8s.io/api, k8s.io/apiextensions-apiserver
// and k8s.io/kube-aggregator, current and older releases, and is committed
// as zz_generated.lifecycle.go. Users add third-party entries with rules
// files in this package's format or in pluto's versions file format.
//
// The package only holds data and lookups: it never talks to a cluster,
// never prints and never reads files on its own.
package apilifecycle

//go:generate go run ./internal/gen -o zz_generated.lifecycle.go
//go:generate go run ./internal/gen/gates -o featuregates-removed.yaml
