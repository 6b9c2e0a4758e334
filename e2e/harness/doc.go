// Package harness starts a real, local Kubernetes control plane for the e2e
// tests and for the demo: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and KWOK (fake nodes and pod lifecycle), and on request the
// Kueue and JobSet controllers, all on 127.0.0.1 with free ports and
// temporary directories.
//
// The binaries come from the Go module proxy: e2e/tools/build.sh builds them
// once into a cache keyed by version, and the harness calls it when a binary
// is missing. Every process runs in its own process group with a parent-death
// signal, is stopped with SIGTERM and then SIGKILL, and its temporary
// directory is removed, so nothing outlives a test run.
//
// The package also holds the fixtures the tests share: fake GPU nodes,
// Deployments whose pods KWOK runs to Ready, PDBs, Jobs, Kueue queues and
// multi-version CRDs. It never mocks the apiserver.
package harness
