package nccl

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Fabric names a network profile for the test job.
type Fabric string

// Fabric profiles.
const (
	// FabricInfiniBand uses NCCL's IB transport over RDMA devices handed out
	// by a device plugin (NVIDIA Network Operator's shared RDMA device by
	// default).
	FabricInfiniBand Fabric = "ib"
	// FabricRoCE is InfiniBand verbs over Ethernet (RoCE v2, GID index 3).
	FabricRoCE Fabric = "roce"
	// FabricEFA is AWS Elastic Fabric Adapter through libfabric and the
	// aws-ofi-nccl plugin (the image must carry it).
	FabricEFA Fabric = "efa"
	// FabricTCP forces NCCL's socket transport: slow, but it works anywhere
	// and proves the job plumbing; it cannot see a broken IB or EFA
	// fabric, so it is never the default where the nodes have one
	// (DetectFabric).
	FabricTCP Fabric = "tcp"
)

// EFANetName is the NCCL network name the efa profile forces: the
// aws-ofi-nccl plugin's.
const EFANetName = "AWS Libfabric"

// Fabrics lists the profiles in help order.
var Fabrics = []Fabric{FabricInfiniBand, FabricRoCE, FabricEFA, FabricTCP}

// ErrGKEFabric is the answer to the GKE GPUDirect-TCPX/TCPXO fabric, which
// is not offered. Google's published nccl-test manifests for those fabrics
// (GoogleCloudPlatform/container-engine-accelerators, gpudirect-tcpx/ and
// gpudirect-tcpxo/nccl-test-latest.yaml) also run the RxDM receive-datapath
// sidecar, request the GPU and NIC devices through a devices annotation and
// share a socket volume between it and the test; without them NCCL falls
// back to plain TCP without a word and the test measures the wrong fabric.
// Those parts are tied to GKE versions and machine types and cannot be
// checked here, so the fabric is refused rather than half-rendered.
var ErrGKEFabric = errors.New("the gke fabric (GPUDirect-TCPX/TCPXO) is not offered: a correct test needs Google's RxDM sidecar, devices annotation and shared socket volume; " +
	"run Google's published manifest (github.com/GoogleCloudPlatform/container-engine-accelerators, gpudirect-tcpxo/nccl-test-latest.yaml or gpudirect-tcpx/nccl-test-latest.yaml), " +
	"or --fabric tcp to check the job plumbing")

// ParseFabric reads a profile name (also "infiniband").
func ParseFabric(s string) (Fabric, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "ib", "infiniband":
		return FabricInfiniBand, nil
	case "roce":
		return FabricRoCE, nil
	case "efa":
		return FabricEFA, nil
	case "gke", "gke-multinetwork", "multinetwork", "tcpx", "tcpxo", "gpudirect-tcpx", "gpudirect-tcpxo":
		return "", ErrGKEFabric
	case "tcp", "socket":
		return FabricTCP, nil
	}
	return "", fmt.Errorf("unknown fabric %q: want ib, roce, efa or tcp", s)
}

// FabricOptions tune a profile.
type FabricOptions struct {
	// RDMAResource is the extended resource of RDMA devices for ib and
	// roce (default rdma/rdma_shared_device_a) and RDMACount how many each
	// worker asks for (default 1).
	RDMAResource string
	RDMACount    int
	// EFADevices is vpc.amazonaws.com/efa per worker (default 32, a p5).
	EFADevices int
	// SocketInterface is NCCL_SOCKET_IFNAME for bootstrap and the tcp
	// profile (default eth0).
	SocketInterface string
}

// profile is what a fabric adds to the worker pods.
type profile struct {
	env         []corev1.EnvVar
	resources   corev1.ResourceList
	annotations map[string]string
}

func (f Fabric) profile(o FabricOptions) (profile, error) {
	ifname := o.SocketInterface
	if ifname == "" {
		ifname = "eth0"
	}
	p := profile{resources: corev1.ResourceList{}, annotations: map[string]string{}}
	env := map[string]string{"NCCL_SOCKET_IFNAME": ifname}
	rdma := func() {
		name := o.RDMAResource
		if name == "" {
			name = "rdma/rdma_shared_device_a"
		}
		n := o.RDMACount
		if n <= 0 {
			n = 1
		}
		p.resources[corev1.ResourceName(name)] = *resource.NewQuantity(int64(n), resource.DecimalSI)
		env["NCCL_IB_DISABLE"] = "0"
	}
	switch f {
	case FabricInfiniBand:
		rdma()
		env["NCCL_NET"] = "IB"
	case FabricRoCE:
		rdma()
		env["NCCL_NET"] = "IB"
		env["NCCL_IB_GID_INDEX"] = "3"
	case FabricEFA:
		n := o.EFADevices
		if n <= 0 {
			n = 32
		}
		p.resources["vpc.amazonaws.com/efa"] = *resource.NewQuantity(int64(n), resource.DecimalSI)
		env["FI_PROVIDER"] = "efa"
		env["FI_EFA_USE_DEVICE_RDMA"] = "1"
		// Without NCCL_NET, NCCL picks the best network it finds and falls
		// back to sockets without a word when the OFI plugin does not load
		// (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-net):
		// the test would measure TCP and call it EFA. Forced, a missing
		// plugin is an error. Every aws-ofi-nccl release answers to "AWS
		// Libfabric" (aws/aws-ofi-nccl@e7e78dac src/nccl_ofi_interface_nvidia.cpp,
		// nvidia_plugin_name_fixup: releases after 1.11.0 renamed it and
		// still accept the old name).
		env["NCCL_NET"] = EFANetName
	case FabricTCP:
		env["NCCL_IB_DISABLE"] = "1"
		env["NCCL_NET"] = "Socket"
	default:
		return p, fmt.Errorf("unknown fabric %q", f)
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p.env = append(p.env, corev1.EnvVar{Name: k, Value: env[k]})
	}
	return p, nil
}

// EFAResource is the extended resource of AWS's EFA device plugin.
const EFAResource corev1.ResourceName = "vpc.amazonaws.com/efa"

// DetectFabric picks the profile the nodes' devices call for: efa when
// every node advertises vpc.amazonaws.com/efa, ib when every node
// advertises an rdma/ resource (the NVIDIA Network Operator's shared RDMA
// devices; RoCE looks the same and takes --fabric roce), else tcp. It
// returns the RDMA resource it saw and why it chose.
func DetectFabric(allocatable []corev1.ResourceList) (Fabric, string, string) {
	if len(allocatable) == 0 {
		return FabricTCP, "", "no node to read devices from"
	}
	efa, rdma := true, ""
	rdmaAll := true
	for _, a := range allocatable {
		if q, ok := a[EFAResource]; !ok || q.IsZero() {
			efa = false
		}
		found := ""
		for name, q := range a {
			if strings.HasPrefix(string(name), "rdma/") && !q.IsZero() && (found == "" || string(name) < found) {
				found = string(name)
			}
		}
		if found == "" {
			rdmaAll = false
		} else if rdma == "" {
			rdma = found
		}
	}
	switch {
	case efa:
		return FabricEFA, "", "every node advertises " + string(EFAResource)
	case rdmaAll:
		return FabricInfiniBand, rdma, "every node advertises " + rdma
	}
	return FabricTCP, "", "no node advertises " + string(EFAResource) + " or an rdma/ device: over TCP the test cannot see the fabric"
}
