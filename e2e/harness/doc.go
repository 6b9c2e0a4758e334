// Package harness is what the e2e tests use of the local control plane of
// pkg/localcluster (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, KWOK, and on request the Kueue and JobSet managers, all on
// 127.0.0.1): Main starts one plane per test package and Shared hands it to
// each test, and the package adds what only tests need: a namespace per
// test, Deployment, PDB, Job and Kueue fixtures that wait for the real
// controllers, multi-version CRDs, audit-log readers and CPU accounting for
// benchmarks.
//
// ControlPlane embeds *localcluster.Cluster, so its fields (Client, Config,
// Kubeconfig, Binaries, ...) and methods (CreateGPUNodes, ApplyCRDs,
// StopAPIServer, ...) are the cluster's; the names this package has always
// exported for them (Options, Binaries, GPUPool, KubeVersion, Poll, ...)
// stay, as aliases and thin wrappers.
//
// The binaries come from the Go module proxy: e2e/tools/build.sh builds them
// once into a cache keyed by version, and the harness calls it when a binary
// is missing (E2E_NO_BUILD=1 makes that an error). Every process runs in its
// own process group with a parent-death signal, is stopped with SIGTERM and
// then SIGKILL, and its temporary directory is removed, so nothing outlives
// a test run. It never mocks the apiserver.
package harness
