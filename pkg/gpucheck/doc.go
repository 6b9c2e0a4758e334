// Package gpucheck owns the per-node gates that run after a GPU node is
// upgraded: the exact GPU count (device plugin resources, MIG layouts and
// DRA ResourceSlices), kubelet configuration drift read from the configz
// endpoint, fatal Xid events in the kernel log, and DCGM level-1
// diagnostics, plus the privileged per-node pods that collect the last two.
// Validator runs them all (and the NCCL test of pkg/nccl) on one cluster and
// returns one Report; the plugin only wires flags to it and prints. The Xid
// catalog is data (xid-catalog.csv, NVIDIA's published table), and so are
// the severities of DCGM's error codes (dcgm-error-severity.csv, DCGM's own
// table), by which a DCGM 3 warning is judged (docs/dcgm.md).
//
// It returns typed findings and never prints, reads flags or exits. Parsers
// never panic on any input; each has a fuzz target with a seed corpus in
// testdata/.
package gpucheck
