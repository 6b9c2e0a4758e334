//go:build linux

package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// ExecNode is a node whose pods really run, on this machine: it SIMULATES
// the kubelet the way KWOK simulates nodes, but instead of faking a pod's
// outcome it runs the pod's main container command as a local process with
// the suite's binaries, then reports the container's exit code in the pod's
// status. It exists for the fleet programme's e2e suite, whose Argo
// Workflows pods must run `kubectl skew fleet step`: Argo's emissary
// wrapper (`/var/run/argo/argoexec emissary ... --`) is stripped and the
// wrapped command runs as is; Argo's init and wait containers are reported
// done, and the wait container's one report, the template's output
// parameters read from files, is written as it would write it
// (execnode_outputs.go). There are no images, volumes or network
// namespaces: a pod sees this machine's files and the environment the test
// gives it, except that a path its output parameters name is a file of its
// own under Dir, which its arguments name in that path's place.
type ExecNode struct {
	Name string
	cp   *Cluster
	opts ExecNodeOptions
	// dyn writes WorkflowTaskResults (nil: one from cp.Config).
	dyn dynamic.Interface

	mu      sync.Mutex
	running map[string]*exec.Cmd // pod UID -> its command
	handled map[string]bool
	ran     []Execution
	cancel  context.CancelFunc
	done    chan struct{}
}

// ExecNodeOptions configure an ExecNode.
type ExecNodeOptions struct {
	// Name of the node.
	Name string
	// Labels are added to the node (a workflow's nodeSelector picks it).
	Labels map[string]string
	// Env is added to every command's environment (PATH with the suite's
	// binaries, KUBECONFIG standing in for the pod's service account, the
	// store's credentials).
	Env []string
	// Dir gets one log file per pod (<pod>.log).
	Dir string
	// PodIP is the address reported as every pod's IP and the node's
	// (127.0.0.1 when empty). Endpoints may not hold a loopback address
	// (core/v1 EndpointAddress.ip), so a pod that must be reached through
	// a Service, as the apiserver's service proxy does, needs an address
	// of this machine other than loopback, where its command listens.
	PodIP string
}

func (o ExecNodeOptions) podIP() string {
	if o.PodIP == "" {
		return "127.0.0.1"
	}
	return o.PodIP
}

// Execution is one pod the node ran.
type Execution struct {
	Pod       string
	Namespace string
	Argv      []string
	// Env is the main container's own environment as the command got it
	// (values and resolved downward-API fields), NAME=value.
	Env      []string
	ExitCode int
	Started  time.Time
	Finished time.Time
}

// StartExecNode registers the node (Ready, with a lease kept fresh) and
// starts running the pods scheduled to it.
func (cp *Cluster) StartExecNode(ctx context.Context, opts ExecNodeOptions) (*ExecNode, error) {
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, err
	}
	labels := map[string]string{"kubernetes.io/hostname": opts.Name, "kubernetes.io/os": "linux"}
	for k, v := range opts.Labels {
		labels[k] = v
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods:   resource.MustParse("200"),
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Labels: labels}}
	created, err := cp.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create exec node %s: %w", opts.Name, err)
	}
	// The node lifecycle controller writes the new node too (taints,
	// conditions): read it again on a conflict.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if created == nil {
			if created, err = cp.Client.CoreV1().Nodes().Get(ctx, opts.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		created.Status = corev1.NodeStatus{
			Capacity: res, Allocatable: res.DeepCopy(), Phase: corev1.NodeRunning,
			NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: KubeVersion, OperatingSystem: "linux", Architecture: "amd64"},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: opts.podIP()}},
		}
		setNodeReady(created)
		_, err := cp.Client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		created = nil
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("exec node %s status: %w", opts.Name, err)
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &ExecNode{Name: opts.Name, cp: cp, opts: opts, dyn: dyn, running: map[string]*exec.Cmd{}, handled: map[string]bool{}, cancel: cancel, done: make(chan struct{})}
	go n.heartbeat(ctx)
	f := informers.NewSharedInformerFactoryWithOptions(cp.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", opts.Name).String()
	}))
	inf := f.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { n.consider(ctx, o) },
		UpdateFunc: func(_, o any) { n.consider(ctx, o) },
		DeleteFunc: func(o any) {
			if p, ok := o.(*corev1.Pod); ok {
				n.killUID(string(p.UID))
			}
		},
	})
	go func() {
		f.Start(ctx.Done())
		<-ctx.Done()
		f.Shutdown()
		close(n.done)
	}()
	return n, nil
}

func setNodeReady(n *corev1.Node) {
	now := metav1.Now()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "ExecNodeReady",
		Message: "e2e exec node: runs pod commands on this machine", LastHeartbeatTime: now, LastTransitionTime: now}}
}

// heartbeat keeps the node Ready for the node-lifecycle controller: its
// lease renewed and its Ready condition refreshed.
func (n *ExecNode) heartbeat(ctx context.Context) {
	c := n.cp.Client
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		now := metav1.NewMicroTime(time.Now())
		l, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, _ = c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: n.Name},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(n.Name), LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: &now},
			}, metav1.CreateOptions{})
		case err == nil:
			l.Spec.RenewTime = &now
			_, _ = c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(ctx, l, metav1.UpdateOptions{})
		}
		if node, err := c.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err == nil {
			setNodeReady(node)
			_, _ = c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (n *ExecNode) consider(ctx context.Context, o any) {
	p, ok := o.(*corev1.Pod)
	if !ok || p.DeletionTimestamp != nil || (p.Status.Phase != "" && p.Status.Phase != corev1.PodPending) {
		return
	}
	n.mu.Lock()
	if n.handled[string(p.UID)] {
		n.mu.Unlock()
		return
	}
	n.handled[string(p.UID)] = true
	n.mu.Unlock()
	go n.run(ctx, p.DeepCopy())
}

// Argv is the command a pod's main container runs, with Argo's emissary
// wrapper stripped.
func Argv(c corev1.Container) []string {
	cmd := c.Command
	if len(cmd) > 1 && strings.HasSuffix(cmd[0], "argoexec") && cmd[1] == "emissary" {
		for i, a := range cmd {
			if a == "--" {
				cmd = cmd[i+1:]
				break
			}
		}
	}
	return append(append([]string{}, cmd...), c.Args...)
}

func mainContainer(p *corev1.Pod) (corev1.Container, bool) {
	for _, c := range p.Spec.Containers {
		if c.Name == "main" {
			return c, true
		}
	}
	for _, c := range p.Spec.Containers {
		if c.Name != "wait" {
			return c, true
		}
	}
	return corev1.Container{}, false
}

func (n *ExecNode) run(ctx context.Context, p *corev1.Pod) {
	started := time.Now()
	mc, ok := mainContainer(p)
	if !ok {
		return
	}
	outs, oerr := templateOutputs(p, n.opts.Dir)
	if oerr != nil {
		outs = &podOutputs{}
	}
	argv := outs.argv(Argv(mc))
	// The wait container's placeholder comes before the pod is seen
	// running, so the controller waits for its outputs.
	initErr := n.initOutputs(ctx, p, outs)
	if err := n.setStatus(ctx, p, started, nil); err != nil {
		return
	}
	var own []string
	for _, e := range mc.Env {
		switch {
		case e.ValueFrom == nil:
			own = append(own, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil:
			if v, ok := podField(p, e.ValueFrom.FieldRef.FieldPath, n.opts.podIP()); ok {
				own = append(own, e.Name+"="+v)
			}
		}
	}
	env := append(append(os.Environ(), n.opts.Env...), own...)
	code := 127
	log, err := os.OpenFile(filepath.Join(n.opts.Dir, p.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err == nil {
		fmt.Fprintf(log, "$ %s\n", strings.Join(argv, " "))
		cmd := exec.Command(lookPathIn(argv[0], env), argv[1:]...)
		cmd.Args[0] = argv[0]
		cmd.Env, cmd.Stdout, cmd.Stderr = env, log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			fmt.Fprintf(log, "exec: %v\n", err)
		} else {
			n.mu.Lock()
			n.running[string(p.UID)] = cmd
			n.mu.Unlock()
			err := cmd.Wait()
			n.mu.Lock()
			delete(n.running, string(p.UID))
			n.mu.Unlock()
			code = exitCode(err)
		}
		for _, e := range []error{oerr, initErr} {
			if e != nil {
				fmt.Fprintf(log, "outputs: %v\n", e)
			}
		}
		fmt.Fprintf(log, "exit %d\n", code)
		if err := n.reportOutputs(ctx, p, outs); err != nil {
			fmt.Fprintf(log, "outputs: %v\n", err)
		}
		_ = log.Close()
	}
	n.mu.Lock()
	n.ran = append(n.ran, Execution{Pod: p.Name, Namespace: p.Namespace, Argv: argv, Env: own, ExitCode: code, Started: started, Finished: time.Now()})
	n.mu.Unlock()
	_ = n.setStatus(ctx, p, started, &code)
}

// podField is the downward API's value of a pod field for an environment
// variable, as the kubelet resolves it (the field paths the API server
// accepts for env; labels and annotations by key).
func podField(p *corev1.Pod, path, ip string) (string, bool) {
	switch path {
	case "metadata.name":
		return p.Name, true
	case "metadata.namespace":
		return p.Namespace, true
	case "metadata.uid":
		return string(p.UID), true
	case "spec.nodeName":
		return p.Spec.NodeName, true
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, true
	case "status.hostIP", "status.podIP":
		return ip, true
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": p.Labels, "metadata.annotations": p.Annotations} {
		if k, ok := strings.CutPrefix(path, prefix+"['"); ok && strings.HasSuffix(k, "']") {
			v, ok := m[strings.TrimSuffix(k, "']")]
			return v, ok
		}
	}
	return "", false
}

// lookPathIn finds name in the PATH of env (the last PATH wins, as for
// exec), so the pod's command runs the binaries the test put first.
func lookPathIn(name string, env []string) string {
	if strings.Contains(name, "/") {
		return name
	}
	path := ""
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return name
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 127
}

// setStatus reports the pod running (code nil) or ended with code, as a
// kubelet would: the init containers done, the main and wait containers
// running or terminated, the phase.
func (n *ExecNode) setStatus(ctx context.Context, p *corev1.Pod, started time.Time, code *int) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := n.cp.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		start := metav1.NewTime(started)
		now := metav1.Now()
		st := &cur.Status
		ip := n.opts.podIP()
		st.HostIP, st.PodIP, st.StartTime = ip, ip, &start
		st.PodIPs = []corev1.PodIP{{IP: ip}}
		st.InitContainerStatuses = nil
		for _, c := range cur.Spec.InitContainers {
			st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: start, FinishedAt: start}}})
		}
		st.ContainerStatuses = nil
		ready := code == nil
		for _, c := range cur.Spec.Containers {
			cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: ready, Started: ptr.To(ready)}
			switch {
			case code == nil:
				cs.State.Running = &corev1.ContainerStateRunning{StartedAt: start}
			case c.Name == "wait":
				cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: start, FinishedAt: now}
			default:
				reason := "Completed"
				if *code != 0 {
					reason = "Error"
				}
				cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: int32(*code), Reason: reason, StartedAt: start, FinishedAt: now}
			}
			st.ContainerStatuses = append(st.ContainerStatuses, cs)
		}
		cond := func(t corev1.PodConditionType, ok bool) corev1.PodCondition {
			s := corev1.ConditionFalse
			if ok {
				s = corev1.ConditionTrue
			}
			return corev1.PodCondition{Type: t, Status: s, LastTransitionTime: now}
		}
		st.Conditions = []corev1.PodCondition{cond(corev1.PodScheduled, true), cond(corev1.PodInitialized, true), cond(corev1.ContainersReady, ready), cond(corev1.PodReady, ready)}
		switch {
		case code == nil:
			st.Phase = corev1.PodRunning
		case *code == 0:
			st.Phase = corev1.PodSucceeded
		default:
			st.Phase = corev1.PodFailed
		}
		_, err = n.cp.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func (n *ExecNode) killUID(uid string) {
	n.mu.Lock()
	cmd := n.running[uid]
	n.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Kill ends with SIGKILL the running commands whose argv contains every
// one of words (a process killed mid-step, as an OOM kill or a lost node
// would), and returns how many it killed.
func (n *ExecNode) Kill(words ...string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := 0
	for _, cmd := range n.running {
		line := " " + strings.Join(cmd.Args, " ") + " "
		all := true
		for _, w := range words {
			if !strings.Contains(line, " "+w+" ") {
				all = false
			}
		}
		if all && cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			k++
		}
	}
	return k
}

// Running returns the argv of every command running now.
func (n *ExecNode) Running() [][]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out [][]string
	for _, c := range n.running {
		out = append(out, c.Args)
	}
	return out
}

// Ran returns every pod the node ran to the end.
func (n *ExecNode) Ran() []Execution {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Execution(nil), n.ran...)
}

// Stop stops running pods (their commands are killed) and the heartbeat.
func (n *ExecNode) Stop() {
	n.mu.Lock()
	for _, cmd := range n.running {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	n.mu.Unlock()
	n.cancel()
	<-n.done
}
