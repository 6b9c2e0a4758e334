package crdmigrate

import (
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/crdmigrate"
)

// limits are the client-side rate limits of a run; the zero value keeps
// client-go's defaults.
type limits struct {
	qps   float32
	burst int
}

// buildClients returns the clients for the cluster. With limits, every
// client shares one client-go token bucket, so --qps bounds all requests of
// the run together (lists, updates, checkpoint writes). Test getters hand
// out their fake clientsets unchanged (and no metadata or raw object client:
// objects are then counted and rewritten with the dynamic client).
func buildClients(cg cli.ClientGetter, l limits) (crdmigrate.Clients, discovery.DiscoveryInterface, error) {
	if tg, ok := cg.(*cli.TestClientGetter); ok {
		kube, err := tg.Kube()
		if err != nil {
			return crdmigrate.Clients{}, nil, err
		}
		ext, err := tg.APIExtensions()
		if err != nil {
			return crdmigrate.Clients{}, nil, err
		}
		dyn, err := tg.Dynamic()
		if err != nil {
			return crdmigrate.Clients{}, nil, err
		}
		return crdmigrate.Clients{Kube: kube, Ext: ext, Dynamic: dyn}, kube.Discovery(), nil
	}
	base, err := cg.ToRESTConfig()
	if err != nil {
		return crdmigrate.Clients{}, nil, cli.KubeconfigErr(err)
	}
	cfg := rest.CopyConfig(base)
	if l.qps > 0 {
		cfg.QPS, cfg.Burst = l.qps, l.burst
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(l.qps, l.burst)
	} else if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	var c crdmigrate.Clients
	if c.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return c, nil, err
	}
	if c.Ext, err = apiextclient.NewForConfig(cfg); err != nil {
		return c, nil, err
	}
	if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return c, nil, err
	}
	if c.Metadata, err = metadata.NewForConfig(cfg); err != nil {
		return c, nil, err
	}
	if c.Objects, err = crdmigrate.NewRESTObjects(cfg); err != nil {
		return c, nil, err
	}
	d, err := cg.Discovery()
	if err != nil {
		return c, nil, err
	}
	return c, d, nil
}
