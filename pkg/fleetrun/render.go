package fleetrun

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// What render writes, Argo Workflows' schema (argoproj.io/v1alpha1) as of
// v3.7.15, the release the e2e suite runs and validates against
// (e2e/tools/argo). Only the fields the programme uses are declared, so
// the YAML stays the reviewable minimum.
type (
	argoMeta struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace,omitempty"`
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	argoObject struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Metadata   argoMeta `json:"metadata"`
		Spec       argoSpec `json:"spec"`
	}
	argoSpec struct {
		Entrypoint         string            `json:"entrypoint,omitempty"`
		ServiceAccountName string            `json:"serviceAccountName,omitempty"`
		NodeSelector       map[string]string `json:"nodeSelector,omitempty"`
		Arguments          *argoArguments    `json:"arguments,omitempty"`
		OnExit             string            `json:"onExit,omitempty"`
		PodGC              *argoPodGC        `json:"podGC,omitempty"`
		TTLStrategy        *argoTTL          `json:"ttlStrategy,omitempty"`
		Synchronization    *argoSync         `json:"synchronization,omitempty"`
		SecurityContext    *argoPodSecurity  `json:"securityContext,omitempty"`
		Templates          []argoTemplate    `json:"templates"`
	}
	argoPodGC struct {
		Strategy string `json:"strategy"`
	}
	argoTTL struct {
		SecondsAfterSuccess int32 `json:"secondsAfterSuccess"`
		SecondsAfterFailure int32 `json:"secondsAfterFailure"`
	}
	// argoPodSecurity and argoSecurity are the Pod Security Standards'
	// "restricted" profile (https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted):
	// non-root, the runtime's default seccomp profile, no privilege
	// escalation, every capability dropped.
	argoPodSecurity struct {
		RunAsNonRoot   bool        `json:"runAsNonRoot"`
		SeccompProfile argoSeccomp `json:"seccompProfile"`
	}
	argoSeccomp struct {
		Type string `json:"type"`
	}
	argoSecurity struct {
		AllowPrivilegeEscalation bool     `json:"allowPrivilegeEscalation"`
		RunAsNonRoot             bool     `json:"runAsNonRoot"`
		Capabilities             argoCaps `json:"capabilities"`
	}
	argoCaps struct {
		Drop []string `json:"drop"`
	}
	argoResources struct {
		Requests map[string]string `json:"requests"`
		Limits   map[string]string `json:"limits"`
	}
	argoParam struct {
		Name        string `json:"name"`
		Value       string `json:"value,omitempty"`
		Description string `json:"description,omitempty"`
	}
	argoArguments struct {
		Parameters []argoParam `json:"parameters,omitempty"`
	}
	argoInputs struct {
		Parameters []argoParam `json:"parameters,omitempty"`
	}
	argoTemplate struct {
		Name string `json:"name"`
		// ServiceAccountName runs this template's pods as another account
		// than the Workflow's (Template.serviceAccountName at v3.7.15).
		ServiceAccountName string            `json:"serviceAccountName,omitempty"`
		Inputs             *argoInputs       `json:"inputs,omitempty"`
		Outputs            *argoOutputs      `json:"outputs,omitempty"`
		Metadata           *argoPodMeta      `json:"metadata,omitempty"`
		Parallelism        *int              `json:"parallelism,omitempty"`
		Synchronization    *argoSync         `json:"synchronization,omitempty"`
		NodeSelector       map[string]string `json:"nodeSelector,omitempty"`
		SecurityContext    *argoPodSecurity  `json:"securityContext,omitempty"`
		// ActiveDeadlineSeconds is an int or an Argo expression string.
		ActiveDeadlineSeconds any            `json:"activeDeadlineSeconds,omitempty"`
		Steps                 [][]argoStep   `json:"steps,omitempty"`
		DAG                   *argoDAG       `json:"dag,omitempty"`
		Suspend               *argoSuspend   `json:"suspend,omitempty"`
		Container             *argoContainer `json:"container,omitempty"`
		RetryStrategy         *argoRetry     `json:"retryStrategy,omitempty"`
		Resource              *argoResource  `json:"resource,omitempty"`
	}
	// argoResource is a resource template (Template.Resource,
	// ResourceTemplate in workflow_types.go at v3.7.15): the executor
	// creates the manifest, then polls the object until successCondition
	// or failureCondition holds (workflow/executor/resource.go,
	// WaitResource and checkResourceState: a GET of the object, so its
	// service account needs create and get on it).
	argoResource struct {
		Action            string `json:"action"`
		SetOwnerReference bool   `json:"setOwnerReference,omitempty"`
		SuccessCondition  string `json:"successCondition,omitempty"`
		FailureCondition  string `json:"failureCondition,omitempty"`
		Manifest          string `json:"manifest"`
	}
	argoOutputs struct {
		Parameters []argoOutParam `json:"parameters"`
	}
	argoOutParam struct {
		Name      string        `json:"name"`
		ValueFrom argoValuePath `json:"valueFrom"`
	}
	argoValuePath struct {
		Path    string `json:"path"`
		Default string `json:"default"`
	}
	argoPodMeta struct {
		Labels map[string]string `json:"labels,omitempty"`
	}
	argoSync struct {
		Semaphores []argoSemaphore `json:"semaphores,omitempty"`
		Mutexes    []argoMutex     `json:"mutexes,omitempty"`
	}
	argoMutex struct {
		Name string `json:"name"`
	}
	argoSemaphore struct {
		ConfigMapKeyRef argoKeyRef `json:"configMapKeyRef"`
	}
	argoKeyRef struct {
		Name string `json:"name"`
		Key  string `json:"key"`
	}
	argoStep struct {
		Name        string         `json:"name"`
		Template    string         `json:"template,omitempty"`
		TemplateRef *argoTmplRef   `json:"templateRef,omitempty"`
		Arguments   *argoArguments `json:"arguments,omitempty"`
		When        string         `json:"when,omitempty"`
		ContinueOn  *argoContinue  `json:"continueOn,omitempty"`
	}
	argoTmplRef struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	argoContinue struct {
		Failed bool `json:"failed,omitempty"`
	}
	argoDAG struct {
		Tasks []argoTask `json:"tasks"`
	}
	argoTask struct {
		Name      string         `json:"name"`
		Template  string         `json:"template"`
		Depends   string         `json:"depends,omitempty"`
		Arguments *argoArguments `json:"arguments,omitempty"`
	}
	argoSuspend struct {
		Duration string `json:"duration,omitempty"`
	}
	argoContainer struct {
		Image           string        `json:"image"`
		Command         []string      `json:"command"`
		Args            []string      `json:"args"`
		Env             []argoEnv     `json:"env"`
		EnvFrom         []argoEnvFrom `json:"envFrom,omitempty"`
		Resources       argoResources `json:"resources"`
		SecurityContext argoSecurity  `json:"securityContext"`
	}
	argoEnv struct {
		Name      string        `json:"name"`
		ValueFrom argoValueFrom `json:"valueFrom"`
	}
	argoValueFrom struct {
		FieldRef argoFieldRef `json:"fieldRef"`
	}
	argoFieldRef struct {
		FieldPath string `json:"fieldPath"`
	}
	argoEnvFrom struct {
		Prefix    string        `json:"prefix,omitempty"`
		SecretRef argoSecretRef `json:"secretRef"`
	}
	argoSecretRef struct {
		Name string `json:"name"`
	}
	argoRetry struct {
		Limit       string       `json:"limit"`
		RetryPolicy string       `json:"retryPolicy"`
		Expression  string       `json:"expression,omitempty"`
		Backoff     argoBackoffs `json:"backoff"`
	}
	argoBackoffs struct {
		Duration string `json:"duration"`
		Factor   string `json:"factor"`
		Cap      string `json:"cap"`
	}
)

// Defaults of the rendered objects.
const (
	DefaultNamespace      = "argo"
	DefaultServiceAccount = "gpufleet-upgrader"
	// RetryExpression retries a step that answered "not yet" (4) or was
	// killed (a signal: 128+n), or whose pod failed outside the command
	// (Argo's Error); a halt (1), an unreachable cluster (3) or a usage
	// error (2) go to a person instead. lastRetry.exitCode is a string,
	// "-1" when not available, and lastRetry.status is Error or Failed
	// (argoproj/argo-workflows v3.7.15, docs/retries.md); the status test
	// comes first, so an errored node is retried whatever its code. The
	// e2e suite runs it under that release's workflow-controller: "not
	// yet" in e2e/fleet TestFleetClosedWindowWaits, a SIGKILL (137) in
	// TestFleetResumesAfterKills.
	RetryExpression = `lastRetry.status == "Error" || asInt(lastRetry.exitCode) == 4 || asInt(lastRetry.exitCode) > 128`
	// RetryLimit bounds the retries of one attempt chain; at the default
	// cap of 10 minutes it covers about a week of closed windows.
	RetryLimit = "1000"
	// Suspend node kinds, the "kind" input parameter approve looks for.
	SuspendApproval = "approval"
	SuspendHold     = "hold"
	// SuspendWait is a timed suspend until a gate's or step's next
	// opening (WaitFile); approve does not release it.
	SuspendWait = "wait"
	// WaitFile is where a step pod's command writes how long to wait
	// (--wait-file), read back as the template's output parameter "wait"
	// (outputs.parameters[].valueFrom.path, with default "0" when the
	// file is missing: argo-workflows v3.7.15
	// pkg/apis/workflow/v1alpha1/workflow_types.go, ValueFrom.Path and
	// Default). /tmp is in the suite's image (hack/image, mode 1777).
	// The default "0" (no wait) is safe only because every step and gate
	// re-checks the store: a wait whose file was lost ends the paced
	// template as if done, and the next step then refuses, its earlier
	// step not completed (TestNextStepRefusesWhenAWaitIsLost), or the
	// gate asks again.
	WaitFile = "/tmp/gpufleet-wait"
	// PodGCStrategy deletes a step's pod once it succeeded (its output is
	// evidence in the store); a failed one stays for kubectl logs.
	PodGCStrategy = "OnPodSuccess"
	// A finished Workflow stays a week after success and a month after a
	// failure (ttlStrategy), for status and post-mortems; the store keeps
	// the run's record for good.
	TTLAfterSuccess = 7 * 24 * 3600
	TTLAfterFailure = 30 * 24 * 3600
	// Template names of the run's exit handler and its step.
	exitTemplate = "record-end"
)

// StepDeadlines bound one attempt of each step kind: the pod's
// activeDeadlineSeconds, past which the kubelet stops it (exit 137/143, a
// signal, so RetryExpression retries it and the step resumes from the
// state it recorded in the store). They are the longest a healthy attempt
// takes, not the step's whole wait: a step waiting on a window or a cap
// answers "not yet" and ends.
var StepDeadlines = map[string]time.Duration{
	StepGate:         10 * time.Minute,
	StepPreflight:    30 * time.Minute,
	StepEtcdSnapshot: 30 * time.Minute,
	StepHold:         15 * time.Minute,
	StepControlPlane: 4 * time.Hour,
	StepPDBBlockers:  15 * time.Minute,
	StepDrain:        6 * time.Hour,
	StepPoolUpgrade:  12 * time.Hour,
	StepGPUValidate:  2 * time.Hour,
	StepRestore:      15 * time.Minute,
	StepVerify:       30 * time.Minute,
	StepCRDMigrate:   2 * time.Hour,
}

// stepDeadline is StepDeadlines[kind] in seconds, 12 hours for a kind the
// table lacks.
func stepDeadline(kind string) int64 {
	if d, ok := StepDeadlines[kind]; ok {
		return int64(d.Seconds())
	}
	return int64((12 * time.Hour).Seconds())
}

// planStepDeadline is a step's deadline in its plan: a drain's is sized
// from its expected duration (which for an inference pool adds the planned
// cold starts) with half again as margin, never below StepDeadlines; a
// paced inference drain longer than the table's 6 hours is not killed
// mid-drain.
func planStepDeadline(p *Plan, s Step) int64 {
	d := stepDeadline(s.Kind)
	if s.Kind != StepDrain || p.Spec.Upgrade == nil {
		return d
	}
	if e := int64((expectedDuration(p.Spec.Upgrade, s) * 3 / 2).Seconds()); e > d {
		return e
	}
	return d
}

// Resources of every step container: a step is one kubectl-skew process
// talking to API servers and the store.
var stepResources = argoResources{
	Requests: map[string]string{"cpu": "100m", "memory": "128Mi"},
	Limits:   map[string]string{"memory": "512Mi"},
}

// restricted is the pod-level part of the restricted profile.
func restricted() *argoPodSecurity {
	return &argoPodSecurity{RunAsNonRoot: true, SeccompProfile: argoSeccomp{Type: "RuntimeDefault"}}
}

// Rendered is what render produces: the objects in order and the YAML.
type Rendered struct {
	// Objects are name and kind, with the size of each object's YAML.
	Objects []RenderedObject
	YAML    []byte
}

// RenderedObject is one object of the output.
type RenderedObject struct {
	Kind, Name string
	Bytes      int
}

// RenderOptions tune render.
type RenderOptions struct {
	// AllowUnpinned accepts an image without a digest (tests).
	AllowUnpinned bool
	// Image, when set, is the suite's image for this render (--image),
	// in place of the fleet file's spec.engine.argo.image.
	Image string
	// WorkflowPerCluster renders each cluster as a Workflow of its own
	// (its steps, holds and exit handler), created and watched by the
	// run's Workflow through resource templates, Argo's workflow of
	// workflows (docs/workflow-of-workflows.md at v3.7.15): no object
	// holds every cluster's steps, so none grows with the cluster's
	// count but the parent, by one node per cluster.
	WorkflowPerCluster bool
}

// CheckPinned is a usage error (exit 2) naming field when ref is not an
// image reference pinned by digest.
func CheckPinned(field, ref string) error {
	if err := pinnedImage(ref); err != nil {
		return cli.Usagef("%s %q: %v: pin it by digest (REPO@sha256:<64 hex>, the index digest make image prints) so every step of the run runs the same binaries", field, ref, err)
	}
	return nil
}

// pinnedImage says why ref is not an image reference pinned by digest.
func pinnedImage(ref string) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("not an image reference")
	}
	if _, ok := r.(name.Digest); !ok {
		return fmt.Errorf("a tag without digest")
	}
	return nil
}

// WorkflowName is the Workflow of a run.
func WorkflowName(fleet, run string) string { return stepName(fleet, run) }

// TemplateName is the WorkflowTemplate of a cluster in a run: per run, so
// rendering the next run never rewrites templates a running Workflow still
// resolves.
func TemplateName(fleet, run, cluster string) string { return stepName(fleet, run, cluster) }

// MutexName is the run's mutex: one Workflow of a run at a time, so a
// second copy applied by mistake (or a resubmission) waits for the first.
func MutexName(fleet, run string) string { return stepName(fleet, run) }

// ClusterMutexName is the mutex of a cluster's Workflow in a run rendered
// with a Workflow per cluster: one at a time per cluster, as MutexName is
// per run, while the run's clusters go on side by side.
func ClusterMutexName(fleet, run, cluster string) string {
	return stepName(fleet, run, cluster, "lock")
}

// LauncherServiceAccount runs the pods that create and watch the
// clusters' Workflows in a run rendered with a Workflow per cluster: it
// alone may create Workflows, so a step pod cannot start a Workflow of
// its choosing as the step pods' account.
func LauncherServiceAccount(sa string) string { return sa + "-launcher" }

// ClusterWorkflowPrefix is the generateName of a cluster's Workflow, as
// the run's Workflow creates it: the cluster's template name and a dash
// (the API server adds five characters, cutting the prefix to 58).
func ClusterWorkflowPrefix(fleet, run, cluster string) string {
	return TemplateName(fleet, run, cluster) + "-"
}

// SemaphoreName is the ConfigMap holding the cluster cap's semaphore.
func SemaphoreName(fleet string) string { return stepName(fleet, "inflight") }

// argoSettings resolves the engine settings with their defaults.
func argoSettings(spec fleetfile.FleetSpec) fleetfile.ArgoEngine {
	a := fleetfile.ArgoEngine{}
	if spec.Engine != nil && spec.Engine.Argo != nil {
		a = *spec.Engine.Argo
	}
	if a.Namespace == "" {
		a.Namespace = DefaultNamespace
	}
	if a.ServiceAccount == "" {
		a.ServiceAccount = DefaultServiceAccount
	}
	if a.RetryInterval == "" {
		a.RetryInterval = "1m"
	}
	if a.RetryCap == "" {
		a.RetryCap = "10m"
	}
	return a
}

// Render writes the run's Argo objects: the semaphore ConfigMap and the
// step pods' RBAC, one WorkflowTemplate per cluster (its steps as one DAG)
// and the run's Workflow (rings in order, batches inside a ring, soak as a
// timed suspend, a gate after each ring, an approval suspend before a ring
// that needs one). A step that halts waits in a "hold" suspend until
// `kubectl skew fleet approve` releases it; it then runs again.
func Render(p *Plan, opts RenderOptions) (*Rendered, error) {
	a := argoSettings(p.Spec)
	field := "spec.engine.argo.image"
	if opts.Image != "" {
		a.Image, field = opts.Image, "--image"
	}
	if a.Image == "" {
		return nil, cli.Usagef("the suite's image is required: --image or spec.engine.argo.image, by digest (make image prints it), such as ghcr.io/gpufleet/suite@sha256:...")
	}
	if !opts.AllowUnpinned {
		if err := CheckPinned(field, a.Image); err != nil {
			return nil, err
		}
	}
	if p.Run == "" {
		return nil, cli.Usagef("render needs a run: --run NAME")
	}
	if p.Spec.Store == nil {
		return nil, cli.Usagef("spec.store.url: required")
	}
	if err := servable(p); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	r := &Rendered{}
	fmt.Fprintf(&out, "# Fleet %s, run %s, to %s: rendered by kubectl skew fleet render --engine argo\n# from plan %s (fleet file %s). Apply in namespace %s; the Workflow starts the run.\n",
		p.Fleet, p.Run, p.Target, p.CreatedAt.Format("2006-01-02T15:04:05Z"), p.FleetDigest, a.Namespace)
	emit := func(kind, name string, v any) error {
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		out.WriteString("---\n")
		out.Write(b)
		r.Objects = append(r.Objects, RenderedObject{Kind: kind, Name: name, Bytes: len(b)})
		return nil
	}
	for _, o := range supportObjects(p, a, opts.WorkflowPerCluster) {
		if err := emit(o.kind, o.name, o.obj); err != nil {
			return nil, err
		}
	}
	for i := range p.Clusters {
		wt := clusterTemplate(p, &p.Clusters[i], a)
		if opts.WorkflowPerCluster {
			wt = clusterWorkflowTemplate(p, &p.Clusters[i], a, wt)
		}
		if err := emit(wt.Kind, wt.Metadata.Name, wt); err != nil {
			return nil, err
		}
	}
	wf := runWorkflow(p, a, opts.WorkflowPerCluster)
	if err := emit(wf.Kind, wf.Metadata.Name, wf); err != nil {
		return nil, err
	}
	r.YAML = out.Bytes()
	return r, nil
}

// servable refuses a run whose step pods could not reach their clusters:
// a pod has none of the operator's kubeconfig contexts, so every cluster's
// kubeconfig must come from a Secret the render grants it. A Cluster API
// management cluster is reached the same way, through the Secret named
// for its managementContext (managementContexts).
func servable(p *Plan) error {
	if c := p.Spec.Credentials; c == nil || c.SecretNamespace == "" {
		return cli.Usagef("spec.credentials.secretNamespace: required to render for Argo: a step pod has no kubeconfig contexts, so put each cluster's kubeconfig in a Secret (CLUSTER-kubeconfig, key value, as Cluster API writes them) and name its namespace; the render grants the step pods get on those Secrets")
	}
	return nil
}

// managementContexts are the Cluster API management contexts of the
// run's clusters, each once, in the plan's order: a step pod reads each
// one's kubeconfig from the Secret named for it (Access.managementClient).
func managementContexts(p *Plan) []string {
	var out []string
	for _, cp := range p.Clusters {
		for _, c := range p.Spec.Clusters {
			if c.Name != cp.Name {
				continue
			}
			if a, ok := p.Spec.Upgrade.ActionFor(c.Labels); ok && a.ClusterAPI != nil && a.ClusterAPI.ManagementContext != "" && !slices.Contains(out, a.ClusterAPI.ManagementContext) {
				out = append(out, a.ClusterAPI.ManagementContext)
			}
		}
	}
	return out
}

type support struct {
	kind, name string
	obj        any
}

// supportObjects are the semaphore ConfigMap and the RBAC of the step
// pods: Argo's executor reports task results; steps read kubeconfig
// Secrets when the file sets credentials.
func supportObjects(p *Plan, a fleetfile.ArgoEngine, perCluster bool) []support {
	md := func(name string) map[string]any {
		return map[string]any{"name": name, "namespace": a.Namespace, "labels": map[string]string{fleetfile.Group + "/fleet": p.Fleet}}
	}
	var out []support
	if p.MaxClustersInFlight > 0 {
		out = append(out, support{"ConfigMap", SemaphoreName(p.Fleet), map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": md(SemaphoreName(p.Fleet)),
			"data": map[string]string{"clusters": fmt.Sprint(p.MaxClustersInFlight)},
		}})
	}
	out = append(out, support{"ServiceAccount", a.ServiceAccount, map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": md(a.ServiceAccount)}})
	rules := []map[string]any{{
		"apiGroups": []string{"argoproj.io"}, "resources": []string{"workflowtaskresults"}, "verbs": []string{"create", "patch"},
	}}
	// Each cluster's kubeconfig Secret, by name, in the namespace that
	// holds them: the engine's, or a Role and RoleBinding of their own.
	var secrets []map[string]any
	if c := p.Spec.Credentials; c != nil && c.SecretNamespace != "" {
		var names []string
		for _, cl := range p.Clusters {
			names = append(names, c.SecretName(cl.Name))
		}
		for _, m := range managementContexts(p) {
			if n := c.SecretName(m); !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		secrets = []map[string]any{{"apiGroups": []string{""}, "resources": []string{"secrets"}, "resourceNames": names, "verbs": []string{"get"}}}
		if c.SecretNamespace == a.Namespace {
			rules, secrets = append(rules, secrets...), nil
		}
	}
	role := func(sa, ns string, rules []map[string]any) []support {
		m := md(sa)
		m["namespace"] = ns
		return []support{
			{"Role", sa, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": m, "rules": rules}},
			{"RoleBinding", sa, map[string]any{
				"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": m,
				"roleRef":  map[string]string{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": sa},
				"subjects": []map[string]string{{"kind": "ServiceAccount", "name": sa, "namespace": a.Namespace}},
			}},
		}
	}
	out = append(out, role(a.ServiceAccount, a.Namespace, rules)...)
	if secrets != nil {
		out = append(out, role(a.ServiceAccount, p.Spec.Credentials.SecretNamespace, secrets)...)
	}
	if perCluster {
		// The run's Workflow creates each cluster's Workflow and reads it
		// until it ends: its resource pods run `argoexec resource create`,
		// which creates the manifest, then GETs the object until a
		// condition holds, then reports the node's result as a
		// WorkflowTaskResult (workflow/executor/resource.go and
		// cmd/argoexec/commands/resource.go at v3.7.15); the child
		// resolves its WorkflowTemplate in the controller, not in a pod.
		l := LauncherServiceAccount(a.ServiceAccount)
		out = append(out, support{"ServiceAccount", l, map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": md(l)}})
		out = append(out, role(l, a.Namespace, []map[string]any{
			{"apiGroups": []string{"argoproj.io"}, "resources": []string{"workflowtaskresults"}, "verbs": []string{"create", "patch"}},
			{"apiGroups": []string{"argoproj.io"}, "resources": []string{"workflows"}, "verbs": []string{"create", "get"}},
		})...)
	}
	return out
}

func params(kv ...string) *argoArguments {
	a := &argoArguments{}
	for i := 0; i+1 < len(kv); i += 2 {
		a.Parameters = append(a.Parameters, argoParam{Name: kv[i], Value: kv[i+1]})
	}
	return a
}

func inputs(names ...string) *argoInputs {
	in := &argoInputs{}
	for _, n := range names {
		in.Parameters = append(in.Parameters, argoParam{Name: n})
	}
	return in
}

func retryStrategy(a fleetfile.ArgoEngine) *argoRetry {
	return &argoRetry{Limit: RetryLimit, RetryPolicy: "Always", Expression: RetryExpression,
		Backoff: argoBackoffs{Duration: string(a.RetryInterval), Factor: "2", Cap: string(a.RetryCap)}}
}

// podIdentity names the step's own pod to the command through the
// downward API (POD_NAME, POD_NAMESPACE: what eviction.SelfFromEnv reads),
// so a drain check run on its own management cluster can leave the
// running workflow's pods out; HOSTNAME, its fallback, is the pod's name
// only while the pod sets no hostname of its own.
func podIdentity() []argoEnv {
	return []argoEnv{
		{Name: eviction.EnvPodName, ValueFrom: argoValueFrom{FieldRef: argoFieldRef{FieldPath: "metadata.name"}}},
		{Name: eviction.EnvPodNamespace, ValueFrom: argoValueFrom{FieldRef: argoFieldRef{FieldPath: "metadata.namespace"}}},
	}
}

// container is a step pod running `kubectl-skew fleet ARGS --store URL`.
func container(p *Plan, a fleetfile.ArgoEngine, args ...string) *argoContainer {
	c := &argoContainer{Image: a.Image, Command: []string{BinSkew}, Args: append(append([]string{"fleet"}, args...), "--store", p.Spec.Store.URL),
		Env: podIdentity(), Resources: stepResources,
		SecurityContext: argoSecurity{AllowPrivilegeEscalation: false, RunAsNonRoot: true, Capabilities: argoCaps{Drop: []string{"ALL"}}}}
	if a.StoreSecret != "" {
		// Under StoreEnvPrefix: the step lifts them for its store client
		// and starts its commands without them.
		c.EnvFrom = []argoEnvFrom{{Prefix: StoreEnvPrefix, SecretRef: argoSecretRef{Name: a.StoreSecret}}}
	}
	return c
}

// guarded is a steps template that runs `inner` and, when it does not
// succeed, holds in a suspend until approve releases it, then calls itself
// again: a halt pauses the programme instead of failing it.
func guarded(name, inner string, in []string, holdArgs ...string) argoTemplate {
	var pass []string
	for _, n := range in {
		pass = append(pass, n, "{{inputs.parameters."+n+"}}")
	}
	failed := "{{steps.run.status}} != Succeeded"
	return argoTemplate{Name: name, Inputs: inputs(in...), Steps: [][]argoStep{
		{{Name: "run", Template: inner, Arguments: params(pass...), ContinueOn: &argoContinue{Failed: true}}},
		{{Name: "hold", Template: SuspendHold, Arguments: params(holdArgs...), When: failed}},
		{{Name: "again", Template: name, Arguments: params(pass...), When: failed}},
	}}
}

// paced is a steps template that runs inner and, when it answers a wait
// (its output "wait": seconds until its next opening, WriteWaitFile),
// suspends that long and runs it again; an answer without a wait ends it.
// A "not yet" that only the clock ends (a window, a freeze, a soak) thus
// waits once until its opening, with no retry and no attempt per backoff
// interval. The suspend's duration is a parameter: the controller reads
// tmpl.Suspend.Duration after the template's inputs are substituted
// (executeSuspend, workflow/controller/operator.go at argo-workflows
// v3.7.15). Each wait nests one level (the controller's stack depth
// limit is 100 by default, maxAllowedStackDepth in
// workflow/controller/controller.go): one per opening, not per retry.
func paced(name, inner string, in []string, ring, cluster, step string) argoTemplate {
	var pass []string
	for _, n := range in {
		pass = append(pass, n, "{{inputs.parameters."+n+"}}")
	}
	wait := "{{steps.run.outputs.parameters.wait}}"
	waits := wait + " > 0"
	return argoTemplate{Name: name, Inputs: inputs(in...), Steps: [][]argoStep{
		{{Name: "run", Template: inner, Arguments: params(pass...)}},
		{{Name: "wait", Template: SuspendWait, Arguments: params("kind", SuspendWait, "ring", ring, "cluster", cluster, "step", step, "seconds", wait), When: waits}},
		{{Name: "again", Template: name, Arguments: params(pass...), When: waits}},
	}}
}

func waitTemplate() argoTemplate {
	return argoTemplate{Name: SuspendWait, Inputs: inputs("kind", "ring", "cluster", "step", "seconds"), Suspend: &argoSuspend{Duration: "{{inputs.parameters.seconds}}"}}
}

// waitOutput is the output parameter "wait" of a paced template's pod.
func waitOutput() *argoOutputs {
	return &argoOutputs{Parameters: []argoOutParam{{Name: "wait", ValueFrom: argoValuePath{Path: WaitFile, Default: "0"}}}}
}

func holdTemplate() argoTemplate {
	return argoTemplate{Name: SuspendHold, Inputs: inputs("kind", "ring", "cluster", "step"), Suspend: &argoSuspend{}}
}

// clusterTemplate is one cluster's WorkflowTemplate.
func clusterTemplate(p *Plan, c *ClusterPlan, a fleetfile.ArgoEngine) argoObject {
	dag := &argoDAG{}
	prev := ""
	for _, s := range c.Steps {
		t := argoTask{Name: s.Name, Template: "guarded-step", Depends: prev, Arguments: params("run", "{{inputs.parameters.run}}", "step", s.Name, "deadline", fmt.Sprint(planStepDeadline(p, s)))}
		dag.Tasks = append(dag.Tasks, t)
		prev = s.Name
	}
	entry := argoTemplate{Name: "cluster", Inputs: inputs("run"), DAG: dag}
	if p.MaxClustersInFlight > 0 {
		entry.Synchronization = &argoSync{Semaphores: []argoSemaphore{{ConfigMapKeyRef: argoKeyRef{Name: SemaphoreName(p.Fleet), Key: "clusters"}}}}
	}
	step := argoTemplate{Name: "step", Inputs: inputs("run", "step", "deadline"), NodeSelector: a.NodeSelector,
		SecurityContext: restricted(), ActiveDeadlineSeconds: "{{inputs.parameters.deadline}}",
		Metadata:      &argoPodMeta{Labels: map[string]string{fleetfile.Group + "/fleet": p.Fleet, fleetfile.Group + "/cluster": c.Name}},
		Container:     container(p, a, "step", "--run", "{{inputs.parameters.run}}", "--cluster", c.Name, "--step", "{{inputs.parameters.step}}", "--wait-file", WaitFile),
		Outputs:       waitOutput(),
		RetryStrategy: retryStrategy(a)}
	return argoObject{APIVersion: "argoproj.io/v1alpha1", Kind: "WorkflowTemplate",
		Metadata: argoMeta{Name: TemplateName(p.Fleet, p.Run, c.Name), Namespace: a.Namespace,
			Labels:      map[string]string{fleetfile.Group + "/fleet": p.Fleet, fleetfile.Group + "/run": p.Run, fleetfile.Group + "/cluster": c.Name, fleetfile.Group + "/ring": c.Ring},
			Annotations: map[string]string{fleetfile.Group + "/steps": fmt.Sprint(len(c.Steps)), fleetfile.Group + "/plan": p.FleetDigest}},
		Spec: argoSpec{ServiceAccountName: a.ServiceAccount, Templates: []argoTemplate{
			entry,
			guarded("guarded-step", "paced-step", []string{"run", "step", "deadline"}, "kind", SuspendHold, "ring", c.Ring, "cluster", c.Name, "step", "{{inputs.parameters.step}}"),
			paced("paced-step", "step", []string{"run", "step", "deadline"}, c.Ring, c.Name, "{{inputs.parameters.step}}"),
			step,
			holdTemplate(),
			waitTemplate(),
		}}}
}

// clusterWorkflowTemplate makes a cluster's WorkflowTemplate a Workflow
// of its own: the run's Workflow creates one from it per cluster
// (workflowTemplateRef), so it carries the Workflow's settings as the
// run's Workflow does: podGC, TTL, a mutex (per cluster), the restricted
// pod profile and an exit handler recording its end.
func clusterWorkflowTemplate(p *Plan, c *ClusterPlan, a fleetfile.ArgoEngine, wt argoObject) argoObject {
	wt.Spec.Entrypoint = "cluster"
	wt.Spec.NodeSelector = a.NodeSelector
	wt.Spec.Arguments = params("run", p.Run)
	wt.Spec.OnExit = exitTemplate
	wt.Spec.PodGC = &argoPodGC{Strategy: PodGCStrategy}
	wt.Spec.TTLStrategy = &argoTTL{SecondsAfterSuccess: TTLAfterSuccess, SecondsAfterFailure: TTLAfterFailure}
	wt.Spec.Synchronization = &argoSync{Mutexes: []argoMutex{{Name: ClusterMutexName(p.Fleet, p.Run, c.Name)}}}
	wt.Spec.SecurityContext = restricted()
	wt.Spec.Templates = append(wt.Spec.Templates, exitHandler(p, a, c.Name))
	return wt
}

// exitHandler records how the Workflow ended in the store (kubectl skew
// fleet end), whatever the phase.
func exitHandler(p *Plan, a fleetfile.ArgoEngine, cluster string) argoTemplate {
	labels := map[string]string{fleetfile.Group + "/fleet": p.Fleet}
	if cluster != "" {
		labels[fleetfile.Group+"/cluster"] = cluster
	}
	return argoTemplate{Name: exitTemplate, NodeSelector: a.NodeSelector,
		SecurityContext: restricted(), ActiveDeadlineSeconds: stepDeadline(StepGate),
		Metadata:      &argoPodMeta{Labels: labels},
		Container:     container(p, a, "end", "--run", "{{workflow.parameters.run}}", "--workflow", "{{workflow.name}}", "--phase", "{{workflow.status}}"),
		RetryStrategy: &argoRetry{Limit: "5", RetryPolicy: "Always", Backoff: argoBackoffs{Duration: "10s", Factor: "2", Cap: "2m"}}}
}

// childTemplate is the run's resource template that creates a cluster's
// Workflow from its WorkflowTemplate and waits for it to end, as Argo's
// workflow of workflows does (docs/workflow-of-workflows.md at v3.7.15:
// action create, successCondition status.phase == Succeeded,
// failureCondition status.phase in (Failed, Error)). The child is owned
// by the run's Workflow (setOwnerReference), so deleting the run deletes
// its clusters' Workflows. One template serves every cluster: its name,
// ring and template are inputs. Its pods run as the launcher account,
// the only one that may create Workflows.
func childTemplate(p *Plan, a fleetfile.ArgoEngine) argoTemplate {
	g := fleetfile.Group
	manifest, _ := yaml.Marshal(map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
		// The engine's namespace, named: kubectl (in the executor) would
		// otherwise take its context's, which outside a pod is not the
		// run's.
		"metadata": map[string]any{
			"generateName": "{{inputs.parameters.template}}-", "namespace": a.Namespace,
			"labels": map[string]string{g + "/fleet": p.Fleet, g + "/run": p.Run,
				g + "/cluster": "{{inputs.parameters.cluster}}", g + "/ring": "{{inputs.parameters.ring}}"},
		},
		"spec": map[string]any{
			"workflowTemplateRef": map[string]string{"name": "{{inputs.parameters.template}}"},
			"arguments":           map[string]any{"parameters": []map[string]string{{"name": "run", "value": "{{workflow.parameters.run}}"}}},
		},
	})
	return argoTemplate{Name: "cluster", Inputs: inputs("cluster", "ring", "template"), SecurityContext: restricted(),
		ServiceAccountName: LauncherServiceAccount(a.ServiceAccount), NodeSelector: a.NodeSelector,
		Metadata: &argoPodMeta{Labels: map[string]string{g + "/fleet": p.Fleet}},
		Resource: &argoResource{Action: "create", SetOwnerReference: true,
			SuccessCondition: "status.phase == Succeeded", FailureCondition: "status.phase in (Failed, Error)",
			Manifest: string(manifest)}}
}

// runWorkflow is the run's Workflow. perCluster: each cluster is a
// Workflow of its own, created and watched by a resource template;
// otherwise each cluster's template runs inside this Workflow.
func runWorkflow(p *Plan, a fleetfile.ArgoEngine, perCluster bool) argoObject {
	var top [][]argoStep
	tmpls := []argoTemplate{{Name: "fleet"}}
	for i, r := range p.Rings {
		if r.Approvers > 0 {
			top = append(top, []argoStep{{Name: "approve-" + r.Name, Template: SuspendApproval,
				Arguments: params("kind", SuspendApproval, "ring", r.Name, "approvers", fmt.Sprint(r.Approvers))}})
		}
		top = append(top, []argoStep{{Name: "ring-" + r.Name, Template: "ring-" + r.Name}})
		rt := argoTemplate{Name: "ring-" + r.Name}
		if r.MaxConcurrent > 0 {
			n := r.MaxConcurrent
			rt.Parallelism = &n
		}
		for _, b := range r.Batches {
			var group []argoStep
			for _, c := range b.Clusters {
				if perCluster {
					group = append(group, argoStep{Name: c, Template: "cluster",
						Arguments: params("cluster", c, "ring", r.Name, "template", TemplateName(p.Fleet, p.Run, c))})
					continue
				}
				group = append(group, argoStep{Name: c, TemplateRef: &argoTmplRef{Name: TemplateName(p.Fleet, p.Run, c), Template: "cluster"},
					Arguments: params("run", "{{workflow.parameters.run}}")})
			}
			rt.Steps = append(rt.Steps, group)
		}
		tmpls = append(tmpls, rt)
		if d := fleetfile.Duration(r.Soak).Value(); d > 0 && i < len(p.Rings)-1 {
			top = append(top, []argoStep{{Name: "soak-" + r.Name, Template: "soak-" + r.Name}})
			// Argo reads a suspend duration as seconds or a Go duration.
			dur := r.Soak
			if _, err := time.ParseDuration(dur); err != nil {
				dur = fmt.Sprint(int64(d.Seconds()))
			}
			tmpls = append(tmpls, argoTemplate{Name: "soak-" + r.Name, Suspend: &argoSuspend{Duration: dur}})
		}
		top = append(top, []argoStep{{Name: "gate-" + r.Name, Template: "guarded-gate", Arguments: params("run", "{{workflow.parameters.run}}", "ring", r.Name)}})
	}
	tmpls[0].Steps = top
	tmpls = append(tmpls,
		guarded("guarded-gate", "paced-gate", []string{"run", "ring"}, "kind", SuspendHold, "ring", "{{inputs.parameters.ring}}", "cluster", "-", "step", "gate"),
		paced("paced-gate", "gate", []string{"run", "ring"}, "{{inputs.parameters.ring}}", "-", "gate"),
		argoTemplate{Name: "gate", Inputs: inputs("run", "ring"), NodeSelector: a.NodeSelector,
			SecurityContext: restricted(), ActiveDeadlineSeconds: stepDeadline(StepGate),
			Metadata:      &argoPodMeta{Labels: map[string]string{fleetfile.Group + "/fleet": p.Fleet}},
			Container:     container(p, a, "gate", "--run", "{{inputs.parameters.run}}", "--ring", "{{inputs.parameters.ring}}", "--wait-file", WaitFile),
			Outputs:       waitOutput(),
			RetryStrategy: retryStrategy(a)},
		exitHandler(p, a, ""),
		argoTemplate{Name: SuspendApproval, Inputs: inputs("kind", "ring", "approvers"), Suspend: &argoSuspend{}},
		holdTemplate(),
		waitTemplate(),
	)
	if perCluster {
		tmpls = append(tmpls, childTemplate(p, a))
	}
	return argoObject{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow",
		Metadata: argoMeta{Name: WorkflowName(p.Fleet, p.Run), Namespace: a.Namespace,
			Labels: map[string]string{fleetfile.Group + "/fleet": p.Fleet, fleetfile.Group + "/run": p.Run}},
		Spec: argoSpec{Entrypoint: "fleet", ServiceAccountName: a.ServiceAccount, NodeSelector: a.NodeSelector,
			Arguments: params("run", p.Run), OnExit: exitTemplate,
			PodGC:           &argoPodGC{Strategy: PodGCStrategy},
			TTLStrategy:     &argoTTL{SecondsAfterSuccess: TTLAfterSuccess, SecondsAfterFailure: TTLAfterFailure},
			Synchronization: &argoSync{Mutexes: []argoMutex{{Name: MutexName(p.Fleet, p.Run)}}},
			SecurityContext: restricted(),
			Templates:       tmpls}}
}
