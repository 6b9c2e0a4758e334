// Package gangdrain implements `kubectl gang-drain`: drain GPU nodes at a
// checkpoint boundary, stopping each training gang as a unit and letting
// Kueue requeue it, with its state kept in the cluster so that any shell can
// follow a run and a re-run resumes it. Subcommands: plan (read-only), run,
// status and restore.
//
// The package owns flags, output and exit codes; the drain itself lives in
// pkg/gang and the checkpoint protocol in pkg/checkpoint. It never touches
// the cluster outside Run methods.
package gangdrain
