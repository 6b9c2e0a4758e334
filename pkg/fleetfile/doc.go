// Package fleetfile is the fleet file: kind Fleet, apiVersion
// gpufleet.dev/v1alpha1. One file names the clusters of a fleet (by
// kubeconfig context, with labels such as gpufleet.dev/ring) and, for the
// fleet programme, the target version, the rings in order, the caps on what
// may be in flight, maintenance windows and freezes, DR pairs, halt checks,
// the upgrade action and the state store.
//
// `kubectl skew fleet inventory -f` reads only the clusters; the programme
// subcommands (plan, step, gate, render, status) read the rest. Both decode
// the file with Load, which is strict: an unknown field, a duplicate key or
// cluster, a bad label, selector, duration, time zone or cron schedule is an
// error that names its field path (spec.rings[1].soak), so a typo never
// silently changes what the programme does.
package fleetfile
