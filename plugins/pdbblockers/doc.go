// Package pdbblockers implements `kubectl pdb-blockers`: for every pod on
// the given nodes, whether a drain's eviction would succeed now, later or
// never, why, and the command that fixes it.
//
// It owns the command, its flags and its report. The eviction rules live in
// pkg/eviction, which gang-drain shares; this package only reads the
// cluster (nodes, pods and PodDisruptionBudgets, plus opt-in server-side
// dry-run evictions) and never changes it.
package pdbblockers
