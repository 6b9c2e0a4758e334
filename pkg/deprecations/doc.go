// Package deprecations finds uses of deprecated and removed Kubernetes APIs.
// Each source is a reader that produces the same Finding type: manifests
// (files, directories, stdin, kustomizations), the apiserver metric
// apiserver_requested_deprecated_apis, audit logs, live objects (field
// managers and last-applied annotations), Helm release records and
// CustomResourceDefinitions. Classify then judges findings against a target
// release with the lifecycle table of package apilifecycle.
//
// The package never prints, never exits and never writes files; it takes
// clients, readers and a clock, and returns typed results. It never keeps
// or returns the values or secret data of a Helm release, only the
// apiVersion and kind of the objects its manifest declares.
package deprecations
