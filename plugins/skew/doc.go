// Package skew implements `kubectl skew`: the version inventory of a
// cluster checked against the Kubernetes version-skew policy, support
// windows, a fleet view over several contexts, and `kubectl skew plan`,
// the control-plane hops and skip-level node-pool upgrades to a target
// minor, live or from a saved report.
//
// It owns flags, output and exit codes. The rules, the planner and the
// calendar live in pkg/skew; this package must not re-implement them, and
// it never mutates the cluster.
package skew
