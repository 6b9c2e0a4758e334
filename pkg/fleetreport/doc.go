// Package fleetreport is the fleet report behind `kubectl skew fleet
// inventory`: one row per cluster of a fleet file or of kubeconfig
// contexts, with its provider, control-plane version, patch lag, support
// window, skew, node pools with their kubelets and GPUs, ring, and the
// verdict of the pre-flight saved in the fleet's store.
//
// Run reads the clusters through the suite's multi-context fan-out
// (pkg/cli FanOutReachable): a cluster that refuses, hangs, forbids a read
// or is not in the kubeconfig is a row with its error, never a missing
// row. The report is rendered as a versioned JSON/YAML document (the
// plugin prints it), as OpenMetrics text for Prometheus (WriteMetrics,
// Push to a Pushgateway) and as one self-contained HTML page (WriteHTML).
package fleetreport
