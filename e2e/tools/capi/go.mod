// Module capi pins Cluster API v1.14.0 for the fleet e2e suite. Nothing is
// built from it: `go mod download` brings the module, whose
// core/config/crd/bases holds the real CRDs (Cluster, MachineDeployment)
// that the suite applies to a local control plane.
module github.com/gpufleet/upgrade-plugins/e2e/tools/capi

go 1.26

require sigs.k8s.io/cluster-api v1.14.0
