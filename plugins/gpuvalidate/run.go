package gpuvalidate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/gpucheck"
	"github.com/gpufleet/upgrade-plugins/pkg/nccl"
)

// Seams for tests: how configz is read and images are resolved.
var (
	newConfigzFetcher = gpucheck.NewConfigzFetcher
	resolveImage      = func(ctx context.Context, ref string) (string, error) { return nccl.ResolveImage(ctx, ref) }
)

// clients are one context's clients.
type clients struct {
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	configz gpucheck.ConfigzFetcher
}

// validator fills gpucheck's Validator from the flags.
func (o *Options) validator(c clients, progress *cli.Progress) *gpucheck.Validator {
	v := &gpucheck.Validator{
		Kube: c.kube, Dynamic: c.dyn, Configz: c.configz, Clock: o.clock, Namespace: o.namespace,
		ResolveImage: resolveImage,
		Selector:     o.Selector, Nodes: o.Nodes,
		PoolLabel: o.PoolLabel, ExpectedGPUs: o.ExpectedGPUs, KubeletVersion: o.KubeletVersion,
		ConfigDrift: o.ConfigDrift, BaselineNode: o.BaselineNode,
		XID: o.XID, Since: o.since, SinceAgo: o.sinceAgo, XidImage: o.XidImage, XidCatalog: o.xidCatalog, FeatureGates: o.gates,
		DCGM: o.DCGM, DCGMImage: o.DCGMImage, DCGMWarnFails: o.DCGMWarnFails,
		NCCL: o.NCCL, NCCLOnly: o.ncclOnly, Image: o.Image, NoResolve: o.NoResolve, Launcher: o.launcher, Fabric: o.fabric, MinBusBW: o.MinBusBW,
		RDMAResource: o.RDMAResource, EFADevices: o.EFADevices, GPUsPerNode: o.GPUsPerNode,
		GateSize: o.gateSize, Tolerance: o.tolerance, SaveBaseline: o.SaveBaseline, Deadline: o.Deadline, Keep: o.Keep,
		Timeout: o.Timeout, Parallel: o.Parallel,
	}
	if progress != nil {
		v.OnEvent = func(s string) { progress.Event("%s", s) }
	}
	return v
}

// Run validates the nodes and prints the report.
func (o *Options) Run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if o.PrintManifest && o.GPUsPerNode > 0 && len(o.Nodes) > 0 {
		// Everything is known: print without touching the cluster.
		return o.printManifest(ctx, clients{}, cli.Metadata{})
	}
	if o.Contexts != nil && o.Contexts.Multi() {
		return o.runContexts(ctx)
	}
	c, md, err := o.connect(ctx, o.cg)
	if err != nil {
		return err
	}
	if o.PrintManifest {
		return o.printManifest(ctx, c, md)
	}
	if o.dryRun.Strategy() == cli.DryRunServer {
		return o.serverDryRun(ctx, c, md)
	}
	progress := cli.NewProgress(o.ErrOut, cli.IsTerminal(o.ErrOut), o.Print.Quiet || o.Print.Structured())
	defer progress.Done()
	rep, err := o.validate(ctx, c, md, progress)
	progress.Done()
	if rep != nil {
		if perr := o.print(rep); perr != nil {
			return perr
		}
	}
	return err
}

// connect reads one context of the kubeconfig and builds its clients.
func (o *Options) connect(ctx context.Context, cg cli.ClientGetter) (clients, cli.Metadata, error) {
	var c clients
	md, err := cli.Connect(ctx, cg)
	if err != nil {
		return c, md, err
	}
	if c.kube, err = cg.Kube(); err != nil {
		return c, md, cli.ClassifyClusterErr(err, md, "creating a client")
	}
	if c.dyn, err = cg.Dynamic(); err != nil {
		return c, md, cli.ClassifyClusterErr(err, md, "creating a client")
	}
	c.configz = newConfigzFetcher(c.kube)
	return c, md, nil
}

// validate runs the gates on the connected cluster and returns the report
// and the error the run ends with (findings, or what could not be checked).
func (o *Options) validate(ctx context.Context, c clients, md cli.Metadata, progress *cli.Progress) (*Report, error) {
	res, unavailable, err := o.validator(c, progress).Validate(ctx)
	if err != nil {
		return nil, o.classify(err, md)
	}
	rep := &Report{Header: cli.NewHeader("GPUValidateReport", md), Report: res}
	if len(unavailable) > 0 {
		err := cli.ClusterErr(fmt.Errorf("%s", strings.Join(unavailable, "; ")))
		for _, u := range unavailable {
			if strings.Contains(u, "get on nodes/proxy is required") {
				hint := "kubectl auth can-i get nodes --subresource=proxy"
				if md.Context != "" {
					hint += " --context " + md.Context
				}
				return rep, cli.WithHint(err, hint+"  (or pass --config-drift=false)")
			}
		}
		return rep, err
	}
	var sev []cli.Severity
	for _, it := range rep.Items {
		for _, f := range it.Findings {
			sev = append(sev, severity(f.Level))
		}
	}
	return rep, cli.Findings(o.FailOn.Count(sev...))
}

// runContexts validates the same selection in several contexts at once
// and reports them together (kind GPUValidateReportList, or one table with
// a CONTEXT column); a context that fails does not stop the others and
// the exit code is the worst of them.
func (o *Options) runContexts(ctx context.Context) error {
	names, err := o.Contexts.Resolve(o.cg)
	if err != nil {
		return err
	}
	type checked struct {
		rep *Report
		err error
	}
	results := cli.FanOutReachable(ctx, o.cg, names, o.Contexts.Parallel, func(ctx context.Context, name string) (checked, error) {
		c, md, err := o.connect(ctx, o.cg.ForContext(name))
		if err != nil {
			return checked{}, err
		}
		rep, err := o.validate(ctx, c, md, nil)
		if rep == nil {
			return checked{}, err
		}
		return checked{rep, err}, nil
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	list := cli.ReportList{APIVersion: cli.ReportAPIVersion("GPUValidateReportList"), Kind: "GPUValidateReportList", Items: []cli.ContextReport{}}
	t := o.table(true)
	codes := make([]int, 0, len(results))
	for _, r := range results {
		cr, ok := cli.ContextEntry(r, o.ErrOut, o.Print.Quiet)
		if ok {
			cr.Report = r.Value.rep
			cr.ExitCode = cli.ExitCode(r.Value.err)
			if r.Value.err != nil && cr.ExitCode != cli.ExitFindings {
				cr.Error = r.Value.err.Error()
				if !o.Print.Quiet {
					fmt.Fprintf(o.ErrOut, "error: context %s: %v\n", r.Context, r.Value.err)
				}
			}
			o.addRows(&t, r.Value.rep, r.Context)
		}
		codes = append(codes, cr.ExitCode)
		list.Items = append(list.Items, cr)
	}
	if err := o.Print.PrintContexts(o.Out, list, t); err != nil {
		return err
	}
	return cli.ContextsOutcome(codes)
}

// classify maps gpucheck's errors onto the suite's exit codes.
func (o *Options) classify(err error, md cli.Metadata) error {
	var sel *gpucheck.SelectionError
	var ce *gpucheck.ClusterError
	var ie *gpucheck.ImageError
	switch {
	case errors.As(err, &sel):
		return cli.UsageErr(err)
	case errors.As(err, &ie):
		return cli.WithHint(cli.ClusterErr(ie.Err), "pass --no-resolve to use the image reference as given")
	case errors.As(err, &ce):
		return cli.ClassifyClusterErr(ce.Err, md, ce.Op)
	}
	return err
}

func severity(l gpucheck.Level) cli.Severity {
	switch l {
	case gpucheck.LevelFail:
		return cli.SeverityBlocking
	case gpucheck.LevelWarning:
		return cli.SeverityWarning
	}
	return cli.SeverityInfo
}

func (o *Options) printManifest(ctx context.Context, c clients, md cli.Metadata) error {
	var names []string
	if o.GPUsPerNode > 0 {
		names = o.Nodes
	}
	m, err := o.validator(c, nil).NCCLManifest(ctx, names, o.GPUsPerNode)
	if err != nil {
		return o.classify(err, md)
	}
	// The job and jobset launchers authenticate over SSH with a key the
	// run makes and keeps in a Secret. A printed manifest goes into
	// runbooks and Git, so it carries no key: the Secret is left out and
	// the header says how to create it when the manifest is applied (the
	// mpijob launcher needs none: the MPI operator makes its own).
	var head strings.Builder
	kept := m.Objects[:0:0]
	for _, u := range m.Objects {
		if u.GetKind() != "Secret" {
			kept = append(kept, u)
			continue
		}
		ns := u.GetNamespace()
		if ns == "" {
			ns = o.namespace
		}
		fmt.Fprintf(&head, "# The SSH key of the launcher is not printed. Create Secret %s at apply time:\n", u.GetName())
		fmt.Fprintf(&head, "#   d=$(mktemp -d) && ssh-keygen -q -t ecdsa -N '' -f \"$d/id_ecdsa\" && cp \"$d/id_ecdsa.pub\" \"$d/authorized_keys\" &&\n")
		fmt.Fprintf(&head, "#   kubectl create secret generic %s -n %s --from-file=\"$d/id_ecdsa\" --from-file=\"$d/authorized_keys\" && rm -r \"$d\"\n", u.GetName(), ns)
	}
	m.Objects = kept
	y, err := m.YAML()
	if err != nil {
		return err
	}
	if _, err := io.WriteString(o.Out, head.String()); err != nil {
		return err
	}
	_, err = o.Out.Write(y)
	return err
}

// serverDryRun sends each object of the NCCL test to the API server as a
// create with dryRun=All and prints what the server answered, kubectl's
// way ("job.batch/NAME created (server dry run)"). An object the server
// refuses (admission, quota, Pod Security, an invalid field) is a
// finding, exit 1: the test would not start.
func (o *Options) serverDryRun(ctx context.Context, c clients, md cli.Metadata) error {
	var names []string
	if o.GPUsPerNode > 0 {
		names = o.Nodes
	}
	m, err := o.validator(c, nil).NCCLManifest(ctx, names, o.GPUsPerNode)
	if err != nil {
		return o.classify(err, md)
	}
	refused := 0
	for _, u := range m.Objects {
		gvr, err := nccl.GVR(u)
		if err != nil {
			return err
		}
		ref := strings.ToLower(u.GetKind()) + "/" + u.GetName()
		if g := gvr.Group; g != "" {
			ref = strings.ToLower(u.GetKind()) + "." + g + "/" + u.GetName()
		}
		_, err = c.dyn.Resource(gvr).Namespace(o.namespace).Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: "kubectl-gpu_validate"})
		switch {
		case err == nil:
			if !o.Print.Quiet {
				fmt.Fprintf(o.Out, "%s created (server dry run)\n", ref)
			}
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || (apierrors.IsForbidden(err) && !isRBACForbidden(err)):
			refused++
			if !o.Print.Quiet {
				fmt.Fprintf(o.Out, "%s refused (server dry run): %v\n", ref, err)
			}
		default:
			return cli.ClassifyClusterErr(err, md, "creating "+ref+" with dryRun=All")
		}
	}
	return cli.Findings(refused)
}

// isRBACForbidden tells a refusal by authorization (the user may not
// create the object: exit 3) from one by admission (the object itself is
// refused: a finding).
func isRBACForbidden(err error) bool {
	return strings.Contains(err.Error(), "cannot create resource")
}
