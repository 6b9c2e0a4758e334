package harness

import (
	"context"

	"github.com/gpufleet/upgrade-plugins/pkg/localcluster"
)

// The fleet programme's parts (e2e/fleet) live in pkg/localcluster beside
// the control plane they run against; ControlPlane's StartArgo and
// StartExecNode come with the embedded cluster.
type (
	FleetBinaries  = localcluster.FleetBinaries
	ArgoController = localcluster.ArgoController
	S3Server       = localcluster.S3Server
)

// Versions of the fleet programme's e2e components.
const (
	ArgoVersion      = localcluster.ArgoVersion
	VersityGWVersion = localcluster.VersityGWVersion
	S3AccessKey      = localcluster.S3AccessKey
	S3SecretKey      = localcluster.S3SecretKey
)

// FleetBinariesIn names the fleet components in a cache directory.
func FleetBinariesIn(dir string) FleetBinaries { return localcluster.FleetBinariesIn(dir) }

// EnsureFleetBinaries builds the fleet components that are missing.
func EnsureFleetBinaries(log func(string, ...any)) (FleetBinaries, error) {
	return localcluster.EnsureFleetBinaries(log)
}

// StartS3 starts the S3-compatible server with one bucket.
func StartS3(ctx context.Context, b FleetBinaries, dir, bucket string) (*S3Server, error) {
	return localcluster.StartS3(ctx, b, dir, bucket)
}
