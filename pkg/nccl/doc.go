// Package nccl owns the NCCL all-reduce smoke test of a wave of GPU nodes:
// it templates the test job for each launcher (MPIJob v2beta1, JobSet, or an
// Indexed Job with a headless Service) and fabric profile, parses the output
// of nccl-tests' all_reduce_perf (text layouts old and new, and the JSON
// report of newer versions), gates the bus bandwidth of one fixed large
// message size against a per-pool baseline kept in a ConfigMap, and runs the
// job in a cluster through interfaces.
//
// It never prints, never reads flags and never exits: callers render the
// typed results. Parsers never panic on any input; each has a fuzz target.
package nccl
