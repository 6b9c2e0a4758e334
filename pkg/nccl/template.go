package nccl

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"
)

// Launcher names how the test job is started.
type Launcher string

// Launchers.
const (
	// LauncherMPIJob is a Kubeflow MPIJob v2beta1 (the MPI operator starts
	// the launcher and wires SSH between the workers).
	LauncherMPIJob Launcher = "mpijob"
	// LauncherJobSet is a JobSet with one Indexed Job of one pod per node.
	LauncherJobSet Launcher = "jobset"
	// LauncherJob is a plain Indexed Job with a headless Service.
	LauncherJob Launcher = "job"
)

// Launchers lists them in help order.
var Launchers = []Launcher{LauncherJob, LauncherJobSet, LauncherMPIJob}

// ParseLauncher reads a launcher name.
func ParseLauncher(s string) (Launcher, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "job", "indexed-job", "indexedjob":
		return LauncherJob, nil
	case "jobset":
		return LauncherJobSet, nil
	case "mpijob", "mpi", "mpi-operator":
		return LauncherMPIJob, nil
	}
	return "", fmt.Errorf("unknown launcher %q: want job, jobset or mpijob", s)
}

// Labels the templates set.
const (
	// RunLabel carries the run id on every object and pod of a test.
	RunLabel = "gpufleet.dev/gpu-validate-run"
	// RoleLabel is "launcher" on the pod whose log holds the results and
	// "worker" on the others (the index-0 pod of a Job or JobSet is both).
	RoleLabel = "gpufleet.dev/nccl-role"
	// AppLabel value for app.kubernetes.io/name.
	AppName = "gpu-validate-nccl"
	// ContainerName is the container whose log holds the results.
	ContainerName = "nccl"
	// sshPort is where the workers' sshd listens (Job and JobSet).
	sshPort = 2222
	// doneFile tells a worker that the launcher has finished.
	doneFile = "/tmp/gpu-validate-done"
)

// GroupVersionResources of the objects a manifest holds.
var (
	GVRJob     = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	GVRService = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	GVRSecret  = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	GVRJobSet  = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	GVRMPIJob  = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v2beta1", Resource: "mpijobs"}
)

// JobSpec describes one NCCL all-reduce test.
type JobSpec struct {
	// Name of the main object (and prefix of the others).
	Name      string
	Namespace string
	// RunID labels everything the run creates.
	RunID    string
	Launcher Launcher
	Fabric   Fabric
	FabricOptions
	// Image runs nccl-tests (all_reduce_perf built with MPI=1), Open MPI
	// and, for the job and jobset launchers, an OpenSSH server and client.
	// Resolve it to a digest first so every node runs the same bits.
	Image string
	// Nodes are the nodes under test: exactly one worker runs on each.
	Nodes []string
	// GPUsPerNode is how many GPUs each worker takes (all of the node's).
	GPUsPerNode int
	// MinBytes and MaxBytes bound the sweep (default 1G and 8G, factor 2).
	MinBytes, MaxBytes int64
	// Iterations per size (default 20).
	Iterations int
	// Deadline bounds the whole job (activeDeadlineSeconds; default 15m).
	Deadline time.Duration
	// NCCLDebug is NCCL_DEBUG (default WARN).
	NCCLDebug string
	// ExtraEnv is added to every container after the fabric's variables.
	ExtraEnv []corev1.EnvVar
	// SSHKey authenticates the launcher to the workers (job and jobset
	// launchers); NewSSHKey makes one.
	SSHKey *SSHKey
}

// Manifest is a rendered test: the objects to create, in order, and how to
// find the pod whose log holds the results.
type Manifest struct {
	Spec    JobSpec
	Objects []*unstructured.Unstructured
	// LauncherSelector selects the pod with the results.
	LauncherSelector string
	// Container is the container with the results.
	Container string
}

func (s *JobSpec) defaults() error {
	if s.Name == "" {
		return fmt.Errorf("job name is empty")
	}
	if len(s.Name) > 40 {
		return fmt.Errorf("job name %q is longer than 40 characters", s.Name)
	}
	if s.Image == "" {
		return fmt.Errorf("no image: pass --image with an nccl-tests image")
	}
	if len(s.Nodes) == 0 {
		return fmt.Errorf("no nodes to test")
	}
	if s.GPUsPerNode <= 0 {
		return fmt.Errorf("GPUs per node must be positive, got %d", s.GPUsPerNode)
	}
	if s.MinBytes <= 0 {
		s.MinBytes = 1 << 30
	}
	if s.MaxBytes <= 0 {
		s.MaxBytes = DefaultGateSize
	}
	if s.MinBytes > s.MaxBytes {
		return fmt.Errorf("minimum size %s is above maximum %s", FormatBytes(s.MinBytes), FormatBytes(s.MaxBytes))
	}
	if s.Iterations <= 0 {
		s.Iterations = 20
	}
	if s.Deadline <= 0 {
		s.Deadline = 15 * time.Minute
	}
	if s.NCCLDebug == "" {
		s.NCCLDebug = "WARN"
	}
	if s.Launcher == "" {
		s.Launcher = LauncherJob
	}
	if s.Fabric == "" {
		s.Fabric = FabricTCP
	}
	if s.RunID == "" {
		s.RunID = s.Name
	}
	if s.Launcher != LauncherMPIJob && s.SSHKey == nil {
		return fmt.Errorf("launcher %s needs an SSH key", s.Launcher)
	}
	return nil
}

// Render templates the objects of a test for its launcher and fabric.
func Render(spec JobSpec) (*Manifest, error) {
	if err := spec.defaults(); err != nil {
		return nil, err
	}
	prof, err := spec.Fabric.profile(spec.FabricOptions)
	if err != nil {
		return nil, err
	}
	m := &Manifest{Spec: spec, Container: ContainerName}
	switch spec.Launcher {
	case LauncherJob:
		err = renderJob(m, prof)
	case LauncherJobSet:
		err = renderJobSet(m, prof)
	case LauncherMPIJob:
		err = renderMPIJob(m, prof)
	default:
		err = fmt.Errorf("unknown launcher %q", spec.Launcher)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (s JobSpec) labels(role string) map[string]string {
	l := map[string]string{
		"app.kubernetes.io/name":       AppName,
		"app.kubernetes.io/managed-by": "kubectl-gpu_validate",
		RunLabel:                       s.RunID,
	}
	if role != "" {
		l[RoleLabel] = role
	}
	return l
}

func (s JobSpec) objectMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: s.labels("")}
}

func (s JobSpec) ranks() int { return len(s.Nodes) * s.GPUsPerNode }

// perfArgs is the all_reduce_perf command line: one rank per GPU (-g 1),
// a sweep up to the gated size, validation on (-c 1).
func (s JobSpec) perfArgs() string {
	return fmt.Sprintf("all_reduce_perf -b %d -e %d -f 2 -g 1 -c 1 -n %d", s.MinBytes, s.MaxBytes, s.Iterations)
}

func (s JobSpec) env(p profile) []corev1.EnvVar {
	env := []corev1.EnvVar{{Name: "NCCL_DEBUG", Value: s.NCCLDebug}}
	env = append(env, p.env...)
	return append(env, s.ExtraEnv...)
}

// mpirunEnvFlags forwards every NCCL/fabric variable to the remote ranks.
func mpirunEnvFlags(env []corev1.EnvVar) string {
	var names []string
	for _, e := range env {
		names = append(names, "-x "+e.Name)
	}
	return strings.Join(names, " ")
}

// workerPod is the pod template shared by every launcher: all the node's
// GPUs, the fabric's devices, IPC_LOCK, /dev/shm in memory, pinned by
// node name with one worker per node, never restarted.
func (s JobSpec) workerPod(p profile, role string, command []string) corev1.PodTemplateSpec {
	res := corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(int64(s.GPUsPerNode), resource.DecimalSI)}
	for k, v := range p.resources {
		res[k] = v
	}
	nodes := append([]string(nil), s.Nodes...)
	sort.Strings(nodes)
	ann := map[string]string{}
	for k, v := range p.annotations {
		ann[k] = v
	}
	if len(ann) == 0 {
		ann = nil
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: s.labels(role), Annotations: ann},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			Affinity: &corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: nodeTerms(nodes),
				}},
				PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{RunLabel: s.RunID}, MatchExpressions: []metav1.LabelSelectorRequirement{{
						Key: RoleLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"worker", "launcher-worker"},
					}}},
					TopologyKey: "kubernetes.io/hostname",
				}},
				},
			},
			// The nodes under test may still be cordoned or carry GPU taints.
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{{
				Name:            containerFor(role),
				Image:           s.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         command,
				Env:             s.env(p),
				Resources:       corev1.ResourceRequirements{Limits: res, Requests: res},
				SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"IPC_LOCK"}}},
				VolumeMounts:    []corev1.VolumeMount{{Name: "dshm", MountPath: "/dev/shm"}},
			}},
			Volumes: []corev1.Volume{{Name: "dshm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}},
		},
	}
}

// nodeTerms pins pods to exactly the named nodes: one term per node (terms
// are ORed), because a metadata.name field selector takes one value.
func nodeTerms(nodes []string) []corev1.NodeSelectorTerm {
	out := make([]corev1.NodeSelectorTerm, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{n},
		}}})
	}
	return out
}

func containerFor(role string) string {
	if role == "worker" {
		return "worker"
	}
	return ContainerName
}

// sshScript runs in every pod of the job and jobset launchers. Each pod
// starts sshd; the index-0 pod waits for every worker, runs mpirun over
// SSH, tells the workers it is done and exits with mpirun's status; the
// others wait for that signal (the Job's deadline bounds both).
func (s JobSpec) sshScript(hosts []string, p profile) string {
	var b strings.Builder
	fmt.Fprintf(&b, "set -u\n")
	fmt.Fprintf(&b, "mkdir -p /root/.ssh && cp /etc/gpu-validate-ssh/id_ecdsa /etc/gpu-validate-ssh/authorized_keys /root/.ssh/ && chmod 600 /root/.ssh/*\n")
	fmt.Fprintf(&b, "ssh-keygen -A >/dev/null 2>&1; mkdir -p /run/sshd\n")
	fmt.Fprintf(&b, "/usr/sbin/sshd -p %d -o PermitRootLogin=prohibit-password -o StrictModes=no\n", sshPort)
	fmt.Fprintf(&b, "if [ \"${JOB_COMPLETION_INDEX:-0}\" != 0 ]; then\n  while [ ! -f %s ]; do sleep 1; done\n  exit 0\nfi\n", doneFile)
	fmt.Fprintf(&b, ": > /tmp/hostfile\n")
	for _, h := range hosts {
		fmt.Fprintf(&b, "echo '%s slots=%d' >> /tmp/hostfile\n", h, s.GPUsPerNode)
	}
	ssh := fmt.Sprintf("ssh -p %d -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR", sshPort)
	fmt.Fprintf(&b, "for h in %s; do until %s \"$h\" true; do sleep 2; done; done\n", strings.Join(hosts, " "), ssh)
	fmt.Fprintf(&b, "mpirun --allow-run-as-root --tag-output -np %d -N %d --hostfile /tmp/hostfile --bind-to none --mca plm_rsh_args '-p %d -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null' %s %s\n",
		s.ranks(), s.GPUsPerNode, sshPort, mpirunEnvFlags(s.env(p)), s.perfArgs())
	fmt.Fprintf(&b, "rc=$?\n")
	fmt.Fprintf(&b, "for h in %s; do %s \"$h\" touch %s || true; done\n", strings.Join(hosts[1:], " "), ssh, doneFile)
	fmt.Fprintf(&b, "exit $rc\n")
	return b.String()
}

func (s JobSpec) sshSecret() *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: s.objectMeta(s.Name + "-ssh"),
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			"id_ecdsa":        s.SSHKey.PrivatePEM,
			"authorized_keys": s.SSHKey.AuthorizedKey,
		},
	}
}

func addSSHVolume(t *corev1.PodTemplateSpec, secret string) {
	t.Spec.Volumes = append(t.Spec.Volumes, corev1.Volume{Name: "ssh", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: secret, DefaultMode: ptr.To[int32](0o400)}}})
	c := &t.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "ssh", MountPath: "/etc/gpu-validate-ssh", ReadOnly: true})
}

func (s JobSpec) indexedJobSpec(tmpl corev1.PodTemplateSpec) batchv1.JobSpec {
	n := int32(len(s.Nodes))
	return batchv1.JobSpec{
		CompletionMode:        ptr.To(batchv1.IndexedCompletion),
		Completions:           ptr.To(n),
		Parallelism:           ptr.To(n),
		BackoffLimit:          ptr.To[int32](0),
		ActiveDeadlineSeconds: ptr.To(int64(s.Deadline / time.Second)),
		Template:              tmpl,
	}
}

func renderJob(m *Manifest, p profile) error {
	s := m.Spec
	svc := s.Name
	hosts := make([]string, len(s.Nodes))
	for i := range s.Nodes {
		hosts[i] = fmt.Sprintf("%s-%d.%s", s.Name, i, svc)
	}
	tmpl := s.workerPod(p, "launcher-worker", []string{"/bin/bash", "-c", s.sshScript(hosts, p)})
	tmpl.Spec.Subdomain = svc
	addSSHVolume(&tmpl, s.Name+"-ssh")
	service := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: s.objectMeta(svc),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 map[string]string{RunLabel: s.RunID},
			Ports:                    []corev1.ServicePort{{Name: "ssh", Port: sshPort}},
		},
	}
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: s.objectMeta(s.Name),
		Spec:       s.indexedJobSpec(tmpl),
	}
	m.LauncherSelector = fmt.Sprintf("%s=%s,batch.kubernetes.io/job-name=%s,batch.kubernetes.io/job-completion-index=0", RunLabel, s.RunID, s.Name)
	return m.add(s.sshSecret(), service, job)
}

func renderJobSet(m *Manifest, p profile) error {
	s := m.Spec
	const rj = "workers"
	hosts := make([]string, len(s.Nodes))
	for i := range s.Nodes {
		hosts[i] = fmt.Sprintf("%s-%s-0-%d.%s", s.Name, rj, i, s.Name)
	}
	tmpl := s.workerPod(p, "launcher-worker", []string{"/bin/bash", "-c", s.sshScript(hosts, p)})
	addSSHVolume(&tmpl, s.Name+"-ssh")
	js := &jobsetv1alpha2.JobSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet"},
		ObjectMeta: s.objectMeta(s.Name),
		Spec: jobsetv1alpha2.JobSetSpec{
			Network:       &jobsetv1alpha2.Network{EnableDNSHostnames: ptr.To(true), Subdomain: s.Name, PublishNotReadyAddresses: ptr.To(true)},
			FailurePolicy: &jobsetv1alpha2.FailurePolicy{MaxRestarts: 0},
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
				Name:     rj,
				Replicas: 1,
				Template: batchv1.JobTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: s.labels("")}, Spec: s.indexedJobSpec(tmpl)},
			}},
		},
	}
	m.LauncherSelector = fmt.Sprintf("%s=%s,jobset.sigs.k8s.io/jobset-name=%s,batch.kubernetes.io/job-completion-index=0", RunLabel, s.RunID, s.Name)
	return m.add(s.sshSecret(), js)
}

// renderMPIJob emits a kubeflow.org/v2beta1 MPIJob as unstructured (the
// MPI operator's Go types are not a dependency). The operator generates
// the SSH keys and hostfile; workers run sshd in the foreground.
func renderMPIJob(m *Manifest, p profile) error {
	s := m.Spec
	worker := s.workerPod(p, "worker", []string{"/usr/sbin/sshd", "-De"})
	env := s.env(p)
	launcherCmd := fmt.Sprintf("mpirun --allow-run-as-root --tag-output -np %d -N %d --bind-to none -map-by slot %s %s",
		s.ranks(), s.GPUsPerNode, mpirunEnvFlags(env), s.perfArgs())
	launcher := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: s.labels("launcher")},
		Spec: corev1.PodSpec{
			RestartPolicy:      corev1.RestartPolicyNever,
			EnableServiceLinks: ptr.To(false),
			Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{{
				Name:    ContainerName,
				Image:   s.Image,
				Command: []string{"/bin/bash", "-c", launcherCmd},
				Env:     env,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}},
			}},
		},
	}
	wt, err := toMap(&worker)
	if err != nil {
		return err
	}
	lt, err := toMap(&launcher)
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v2beta1",
		"kind":       "MPIJob",
		"metadata": map[string]any{
			"name":      s.Name,
			"namespace": s.Namespace,
			"labels":    toAnyMap(s.labels("")),
		},
		"spec": map[string]any{
			"slotsPerWorker":    int64(s.GPUsPerNode),
			"mpiImplementation": "OpenMPI",
			"runPolicy": map[string]any{
				"cleanPodPolicy":        "Running",
				"backoffLimit":          int64(0),
				"activeDeadlineSeconds": int64(s.Deadline / time.Second),
			},
			"mpiReplicaSpecs": map[string]any{
				"Launcher": map[string]any{"replicas": int64(1), "restartPolicy": "Never", "template": lt},
				"Worker":   map[string]any{"replicas": int64(len(s.Nodes)), "restartPolicy": "Never", "template": wt},
			},
		},
	}}
	if s.Namespace == "" {
		unstructured.RemoveNestedField(obj.Object, "metadata", "namespace")
	}
	m.LauncherSelector = fmt.Sprintf("%s=%s,training.kubeflow.org/job-name=%s,training.kubeflow.org/job-role=launcher", RunLabel, s.RunID, s.Name)
	m.Objects = append(m.Objects, obj)
	return nil
}

func toAnyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func toMap(obj any) (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	stripEmpty(m)
	return m, nil
}

// stripEmpty removes the null creationTimestamp and empty status fields
// the converter leaves in typed objects.
func stripEmpty(m map[string]any) {
	for k, v := range m {
		switch vv := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			stripEmpty(vv)
			if len(vv) == 0 && (k == "status" || k == "metadata" || k == "resources" || k == "strategy") {
				delete(m, k)
			}
		case []any:
			for _, e := range vv {
				if em, ok := e.(map[string]any); ok {
					stripEmpty(em)
				}
			}
		}
	}
}

func (m *Manifest) add(objs ...runtime.Object) error {
	for _, o := range objs {
		u, err := toMap(o)
		if err != nil {
			return err
		}
		delete(u, "status")
		if m.Spec.Namespace == "" {
			unstructured.RemoveNestedField(u, "metadata", "namespace")
		}
		m.Objects = append(m.Objects, &unstructured.Unstructured{Object: u})
	}
	return nil
}

// Main returns the object whose status says how the test went.
func (m *Manifest) Main() *unstructured.Unstructured {
	return m.Objects[len(m.Objects)-1]
}

// GVR returns the resource of an object of the manifest.
func GVR(u *unstructured.Unstructured) (schema.GroupVersionResource, error) {
	switch u.GetKind() {
	case "Job":
		return GVRJob, nil
	case "Service":
		return GVRService, nil
	case "Secret":
		return GVRSecret, nil
	case "JobSet":
		return GVRJobSet, nil
	case "MPIJob":
		return GVRMPIJob, nil
	}
	return schema.GroupVersionResource{}, fmt.Errorf("unknown kind %q", u.GetKind())
}

// YAML renders the objects as a multi-document YAML stream.
func (m *Manifest) YAML() ([]byte, error) {
	var buf bytes.Buffer
	for i, o := range m.Objects {
		if i > 0 {
			buf.WriteString("---\n")
		}
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// ExpectedRanks is the number of ranks the test runs.
func (m *Manifest) ExpectedRanks() int { return m.Spec.ranks() }

// String describes the manifest in one line.
func (m *Manifest) String() string {
	return m.Spec.Launcher.String() + " " + m.Spec.Name + " (" + strconv.Itoa(len(m.Spec.Nodes)) + " nodes x " + strconv.Itoa(m.Spec.GPUsPerNode) + " GPUs, fabric " + string(m.Spec.Fabric) + ")"
}

// String returns the launcher name.
func (l Launcher) String() string { return string(l) }
