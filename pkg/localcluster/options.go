package localcluster

import (
	"fmt"
	"io"
	"time"
)

// Options select what a control plane runs beyond the core components.
type Options struct {
	// Kueue starts the Kueue controller manager outside the cluster, with its
	// CRDs applied. Jobs must be created with suspend: true and the
	// kueue.x-k8s.io/queue-name label (Kueue's admission webhooks are not
	// registered; see e2e/README.md).
	Kueue bool
	// JobSet starts the JobSet controller with its CRDs and its JobSet
	// defaulting and validating webhooks registered on a loopback URL.
	JobSet bool
	// FeatureGates are passed to kube-apiserver, kube-controller-manager and
	// kube-scheduler.
	FeatureGates map[string]bool
	// RuntimeConfig entries (group/version=true) are added to the default
	// --runtime-config of kube-apiserver.
	RuntimeConfig []string
	// APIServerArgs are extra kube-apiserver flags, such as "--v=4".
	APIServerArgs []string
	// ControllerManagerArgs are extra kube-controller-manager flags. A
	// repeated --controllers adds to the list, so
	// "--controllers=-node-lifecycle-controller" turns one controller off.
	ControllerManagerArgs []string
	// Ports asks for fixed ports, by component name (Etcd: its client port;
	// KubeAPIServer: its secure port; KubeControllerManager, KubeScheduler;
	// Kueue and JobSet: their webhook port). Every other port is picked
	// free. A component that cannot bind its port starts again on a fresh
	// one, and the log says so.
	Ports map[string]int
	// Dir is the working directory for certificates, data and logs. When
	// empty a temporary one is created and removed by Stop.
	Dir string
	// KeepDir keeps Dir after Stop (logs for a failed run).
	KeepDir bool
	// StartTimeout bounds the whole start-up; 0 means 3 minutes.
	StartTimeout time.Duration
	// Log receives progress lines; nil means none.
	Log io.Writer
}

func (o Options) logWriter() io.Writer {
	if o.Log != nil {
		return o.Log
	}
	return io.Discard
}

func (o Options) startTimeout() time.Duration {
	if o.StartTimeout > 0 {
		return o.StartTimeout
	}
	return 3 * time.Minute
}

func logf(o Options, format string, args ...any) {
	fmt.Fprintf(o.logWriter(), "localcluster: "+format+"\n", args...)
}
