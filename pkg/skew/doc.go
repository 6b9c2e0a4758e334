// Package skew owns the Kubernetes version-skew rules and everything built
// on them: parsing vendor version strings, collecting a cluster's version
// inventory through paged reads, checking the inventory rule by rule
// against the upstream version-skew policy, planning control-plane hops
// with skip-level node-pool upgrades, the provider the cluster runs on
// (kubeadm, EKS, GKE, AKS, Cluster API, k3s, RKE2) and the commands of each
// plan step for it, support windows from a release calendar, and patch
// releases from an image registry.
//
// The rules, the plan and the calendar are pure functions of their inputs.
// Collection takes a kubernetes.Interface and callbacks. The package never
// prints, never exits and knows nothing about cobra or output formats; the
// command in plugins/skew does that.
package skew
