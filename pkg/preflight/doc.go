// Package preflight runs the gates an upgrade to a target minor must pass
// (`kubectl skew preflight`), keeps their evidence, and compares a later
// state of the cluster with saved evidence (`kubectl skew verify`).
//
// Each gate calls the package that owns its logic: pkg/skew for the
// version inventory and the release calendar, pkg/deprecations for
// removed APIs in use, pkg/eviction for drains that will block,
// pkg/crdmigrate for stored versions and webhook health, pkg/gpucheck for
// node readiness and GPU counts. A gate that cannot read what it needs is
// UNKNOWN with the verb and resource or the reason, and the others still
// run. The package never prints and never exits.
package preflight
