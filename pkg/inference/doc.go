// Package inference upgrades the nodes of an inference pool without a
// cold-start storm. It owns the plan (the model Deployments on the pool's
// nodes with their replicas, PodDisruptionBudgets and weight bytes per
// replica, the surge headroom outside the pool, the hydrate bandwidth per
// weight source, and the waves with their cold-start times, the serving
// capacity of every model at every step and the ETA) and the paced run
// that keeps it: cordon the pool, surge the models where headroom exists
// (recorded on each Deployment so that restore undoes exactly that), then
// drain wave by wave, each only once the replicas the previous one
// displaced are Ready elsewhere and every model stays at or above its
// floor.
//
// It uses the suite's pieces rather than copies: pkg/gang's Drainer for
// the run's records on the nodes, cordon and the PDB-aware drain of each
// wave (pkg/eviction underneath), pkg/eviction's Index to find the
// PodDisruptionBudgets of a model, and pkg/nodepool for the GPU product of
// a node (not pkg/skew, which imports this package: the runbook classifies
// its GPU pools with Detect and plans their drain with Compute). It never
// prints, never exits and never reads flags: callers pass options and
// receive events and typed results.
package inference
