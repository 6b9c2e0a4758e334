// Package deprecations implements `kubectl deprecations`: find who still
// uses deprecated or removed Kubernetes APIs, from what the apiserver saw
// (metric, audit log) down to live objects, Helm releases, CRDs and files.
//
// It owns the flags, the target-release rules, the report and its printing;
// the readers and the lifecycle data live in pkg/deprecations and
// pkg/apilifecycle. It never mutates the cluster and never prints Helm
// values or secret data.
package deprecations
