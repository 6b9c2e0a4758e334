// Package gpuvalidate implements `kubectl gpu-validate`: post-upgrade gates for GPU nodes: GPU count, kubelet config drift, XID, DCGM, NCCL.
package gpuvalidate
