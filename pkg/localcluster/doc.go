// Package localcluster runs a real Kubernetes control plane on 127.0.0.1
// from local binaries: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and KWOK (fake nodes and pod lifecycle), and on request the
// Kueue and JobSet managers outside the cluster. `make demo`
// (cmd/democluster) runs it for users and the e2e suite (e2e/harness) for
// tests; its scenario subpackage creates the demo's GPU fleet on it.
//
// What it owns:
//
//   - Binaries: the version-keyed cache that e2e/tools/build.sh fills from
//     the Go module proxy (CacheDir, BinariesIn, EnsureBinaries).
//   - PKI: a CA, the apiserver's serving certificate, client certificates
//     for each component and the admin (group system:masters), the
//     service-account key, and serving certificates for the managers'
//     webhooks.
//   - Processes: each component runs in its own process group with a
//     parent-death signal and its output in logs/<component>.log under the
//     working directory; Stop sends SIGTERM, then SIGKILL, and waits.
//   - Ports: picked free on 127.0.0.1 outside the kernel's ephemeral range,
//     never shared by two clusters of one process. A component that finds
//     its port taken anyway (the port is picked before the component binds
//     it) is restarted on fresh ports, a bounded number of times, each time
//     logged. Close returns only when every process has exited and its
//     ports can be bound again; the state file in the working directory
//     lets another process (democluster down) do the same with Reap.
//   - KWOK's Stages (nodes Ready at once, pods Running until deleted, pods
//     labelled KwokCompleteLabel completed) and the fake GPU nodes the
//     demo and the tests create (GPUPool, CreateGPUNodes).
//   - Kueue and JobSet: their CRDs, certificates, configuration and webhook
//     registrations, so that both run as they would in a cluster, minus
//     Kueue's admission webhooks (Jobs and JobSets are created suspended
//     with the queue-name label). A manager that does not become ready is
//     started again, twice at most, before Start gives up with a
//     *ComponentError naming it and its log.
//
// Test helpers (a shared plane per test package, namespaces per test,
// Deployment, PDB and Kueue fixtures, audit-log readers) live in
// e2e/harness, which wraps this package; nothing here imports e2e.
package localcluster
