// Package gang finds training gangs on a set of nodes and drains those nodes
// gang by gang: it owns gang discovery (Kueue Workloads, JobSets, Indexed
// Jobs, LeaderWorkerSets, kubeflow jobs and pod groups, including each
// gang's pods on other nodes), the drain and restore state machine, and the
// state records it keeps in the cluster (annotations on nodes and on each
// gang's root object) so that any shell can see a run and a re-run resumes
// it.
//
// It speaks the checkpoint-and-yield protocol through pkg/checkpoint and
// evicts the remaining pods through pkg/eviction. It never prints, never
// exits and never reads flags: callers pass options and receive events and
// typed results.
package gang
