// Package eviction owns everything the suite knows about evicting pods
// through the Kubernetes eviction API:
//
//   - Helper evicts one pod (or waits for pods to go away), classifies every
//     refusal the way the API server decides it (Classify, Result, Reason) and
//     retries the ones that can clear, with a backoff that honours Retry-After
//     and a caller deadline. Progress is reported through callbacks.
//   - Load reads nodes, pods and PodDisruptionBudgets in a fixed number of
//     paged lists (per namespace where a cluster-wide list is forbidden) and
//     slims the pods; Snapshot.Index feeds the Evaluator.
//   - Evaluator and Simulation answer, without touching the network, whether
//     evicting a pod would succeed now, later or never, and why. They
//     reproduce the API server's eviction logic over nodes, pods and
//     PodDisruptionBudgets, spend each budget as a simulated drain goes on,
//     and add the blockers that are not budgets (Karpenter annotations, pods
//     without a controller, emptyDir data, finalizers, long grace periods).
//
// kubectl's pkg/drain is used for what it does well (pod filters, the
// eviction request itself); its settings that are unsafe at their zero value
// (retry delay, grace period, writers) are always set explicitly.
//
// The package never prints, never exits and never reads flags: callers pass
// clients, a clock and callbacks, and get typed results back.
package eviction
