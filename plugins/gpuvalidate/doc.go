// Package gpuvalidate implements `kubectl gpu-validate`: the gates a wave of
// upgraded GPU nodes must pass before the next wave starts. `nodes` checks
// readiness, the kubelet version, the exact GPU count and kubelet config
// drift, and optionally fatal Xid events, DCGM level-1 diagnostics and an
// NCCL all-reduce against the pool's baseline; `nccl` runs or prints the
// NCCL test alone.
//
// The checks live in pkg/gpucheck and pkg/nccl; this package wires flags,
// clients, progress lines and the report. It writes only to the streams it
// is given.
package gpuvalidate
