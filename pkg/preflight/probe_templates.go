package preflight

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilptr "k8s.io/utils/ptr"
)

// ProbeName names every object a built-in probe dry-run creates.
const ProbeName = "gpufleet-policy-probe"

// probeImage is the image of the built-in probe pods (never pulled: the
// probes are dry runs). By tag, not digest, as most workloads are.
const probeImage = "registry.k8s.io/pause:3.10"

// Pod variants of the built-in probes.
const (
	// VariantHardened passes every Pod Security level at every version:
	// what a webhook or policy denies of it, it denies for its own rules.
	VariantHardened = "hardened"
	// VariantUnhardened sets no security context: baseline admits it,
	// restricted does not.
	VariantUnhardened = "unhardened"
	// VariantPrivileged is a privileged container on the host's network,
	// PID namespace and filesystem, from a :latest image: baseline and
	// restricted forbid it, and so do most pod policies.
	VariantPrivileged = "privileged"
	// VariantPlain is the one probe of a kind without a pod.
	VariantPlain = "plain"
)

// podVariants are the variants a pod-bearing kind is probed with.
var podVariants = []string{VariantHardened, VariantUnhardened, VariantPrivileged}

// probePodSpec returns the pod spec of a variant.
func probePodSpec(variant string) corev1.PodSpec {
	c := corev1.Container{Name: "probe", Image: probeImage}
	spec := corev1.PodSpec{AutomountServiceAccountToken: utilptr.To(false)}
	switch variant {
	case VariantHardened:
		// Pod Security "restricted" as documented at
		// https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted
		// (and checked against k8s.io/pod-security-admission's own
		// evaluator in the tests).
		spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: utilptr.To(true), RunAsUser: utilptr.To[int64](65534),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		c.SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: utilptr.To(false), RunAsNonRoot: utilptr.To(true),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	case VariantPrivileged:
		c.Image = "registry.k8s.io/pause:latest"
		c.SecurityContext = &corev1.SecurityContext{Privileged: utilptr.To(true), RunAsUser: utilptr.To[int64](0)}
		c.VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: "/host"}}
		spec.HostNetwork, spec.HostPID = true, true
		spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
	}
	spec.Containers = []corev1.Container{c}
	return spec
}

// probeKind is a kind the probes can build a valid object of (an invalid
// one would be refused by validation before any validating webhook or
// policy sees it).
type probeKind struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
	// pods: the kind carries a pod and is probed with podVariants.
	pods bool
	// build returns the object; spec is the pod of a variant when pods.
	build func(meta metav1.ObjectMeta, spec corev1.PodSpec) runtime.Object
}

func (k probeKind) variants() []string {
	if k.pods {
		return podVariants
	}
	return []string{VariantPlain}
}

// object builds the unstructured object of a variant with labels.
func (k probeKind) object(namespace string, labels map[string]string, variant string) (map[string]any, error) {
	meta := metav1.ObjectMeta{Name: ProbeName, Namespace: namespace, Labels: labels}
	if !k.namespaced {
		meta.Namespace = ""
	}
	var spec corev1.PodSpec
	if k.pods {
		spec = probePodSpec(variant)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(k.build(meta, spec))
	if err != nil {
		return nil, err
	}
	m["apiVersion"] = k.gvr.GroupVersion().String()
	m["kind"] = k.kind
	return m, nil
}

// template returns the pod template of a workload probe: the probe's
// labels plus the selector's.
func template(meta metav1.ObjectMeta, spec corev1.PodSpec) (*metav1.LabelSelector, corev1.PodTemplateSpec) {
	sel := map[string]string{"app.kubernetes.io/name": ProbeName}
	lbl := map[string]string{}
	for k, v := range meta.Labels {
		lbl[k] = v
	}
	for k, v := range sel {
		lbl[k] = v
	}
	return &metav1.LabelSelector{MatchLabels: sel}, corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl}, Spec: spec}
}

// probeKinds are the kinds the built-in probes can build, in the order a
// rule that matches several is probed with (the first only): pods first,
// the usual target of admission policy.
var probeKinds = []probeKind{
	{gvr: corev1.SchemeGroupVersion.WithResource("pods"), kind: "Pod", namespaced: true, pods: true,
		build: func(m metav1.ObjectMeta, s corev1.PodSpec) runtime.Object { return &corev1.Pod{ObjectMeta: m, Spec: s} }},
	{gvr: appsv1.SchemeGroupVersion.WithResource("deployments"), kind: "Deployment", namespaced: true, pods: true,
		build: func(m metav1.ObjectMeta, s corev1.PodSpec) runtime.Object {
			sel, tpl := template(m, s)
			return &appsv1.Deployment{ObjectMeta: m, Spec: appsv1.DeploymentSpec{Replicas: utilptr.To[int32](1), Selector: sel, Template: tpl}}
		}},
	{gvr: appsv1.SchemeGroupVersion.WithResource("daemonsets"), kind: "DaemonSet", namespaced: true, pods: true,
		build: func(m metav1.ObjectMeta, s corev1.PodSpec) runtime.Object {
			sel, tpl := template(m, s)
			return &appsv1.DaemonSet{ObjectMeta: m, Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tpl}}
		}},
	{gvr: appsv1.SchemeGroupVersion.WithResource("statefulsets"), kind: "StatefulSet", namespaced: true, pods: true,
		build: func(m metav1.ObjectMeta, s corev1.PodSpec) runtime.Object {
			sel, tpl := template(m, s)
			return &appsv1.StatefulSet{ObjectMeta: m, Spec: appsv1.StatefulSetSpec{Replicas: utilptr.To[int32](1), Selector: sel, Template: tpl}}
		}},
	{gvr: appsv1.SchemeGroupVersion.WithResource("replicasets"), kind: "ReplicaSet", namespaced: true, pods: true,
		build: func(m metav1.ObjectMeta, s corev1.PodSpec) runtime.Object {
			sel, tpl := template(m, s)
			return &appsv1.ReplicaSet{ObjectMeta: m, Spec: appsv1.ReplicaSetSpec{Replicas: utilptr.To[int32](1), Selector: sel, Template: tpl}}
		}},
	{gvr: batchv1.SchemeGroupVersion.WithResource("jobs"), kind: "Job", namespaced: true, pods: true,
		build: func(m metav1.ObjectMeta, s corev1.PodSpec) runtime.Object {
			_, tpl := template(m, s)
			tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
			return &batchv1.Job{ObjectMeta: m, Spec: batchv1.JobSpec{Template: tpl}}
		}},
	{gvr: batchv1.SchemeGroupVersion.WithResource("cronjobs"), kind: "CronJob", namespaced: true, pods: true,
		build: func(m metav1.ObjectMeta, s corev1.PodSpec) runtime.Object {
			_, tpl := template(m, s)
			tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
			return &batchv1.CronJob{ObjectMeta: m, Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *",
				JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tpl}}}}
		}},
	{gvr: corev1.SchemeGroupVersion.WithResource("configmaps"), kind: "ConfigMap", namespaced: true,
		build: func(m metav1.ObjectMeta, _ corev1.PodSpec) runtime.Object {
			return &corev1.ConfigMap{ObjectMeta: m, Data: map[string]string{"probe": "true"}}
		}},
	{gvr: corev1.SchemeGroupVersion.WithResource("secrets"), kind: "Secret", namespaced: true,
		build: func(m metav1.ObjectMeta, _ corev1.PodSpec) runtime.Object {
			return &corev1.Secret{ObjectMeta: m, Type: corev1.SecretTypeOpaque, StringData: map[string]string{"probe": "true"}}
		}},
	{gvr: corev1.SchemeGroupVersion.WithResource("services"), kind: "Service", namespaced: true,
		build: func(m metav1.ObjectMeta, _ corev1.PodSpec) runtime.Object {
			return &corev1.Service{ObjectMeta: m, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP,
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
		}},
	{gvr: corev1.SchemeGroupVersion.WithResource("serviceaccounts"), kind: "ServiceAccount", namespaced: true,
		build: func(m metav1.ObjectMeta, _ corev1.PodSpec) runtime.Object {
			return &corev1.ServiceAccount{ObjectMeta: m}
		}},
	{gvr: corev1.SchemeGroupVersion.WithResource("namespaces"), kind: "Namespace",
		build: func(m metav1.ObjectMeta, _ corev1.PodSpec) runtime.Object { return &corev1.Namespace{ObjectMeta: m} }},
}

// podsKind is the probe kind of Pod Security's probes.
var podsKind = probeKinds[0]
