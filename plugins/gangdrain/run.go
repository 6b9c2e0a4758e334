package gangdrain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/gang"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
)

func (o *Options) progress() *cli.Progress {
	return cli.NewProgress(o.ErrOut, cli.IsTerminal(o.ErrOut), o.Print.Quiet)
}

func eventLine(e gang.Event) string {
	switch e.Type {
	case gang.EventNode:
		return fmt.Sprintf("node %s: %s", e.Node, e.Message)
	case gang.EventGang:
		return fmt.Sprintf("gang %s: %s", e.Gang, e.Message)
	case gang.EventWarning:
		return "WARNING: " + e.Message
	default:
		return e.Message
	}
}

func (o *Options) colorizer() cli.Colorizer {
	return o.Print.Colorizer(o.Out)
}

// RunPlan prints what a drain of the nodes would do.
func (o *Options) RunPlan(ctx context.Context) error {
	md, nodes, err := o.connectNodes(ctx)
	if err != nil {
		return err
	}
	d, err := o.drainer(ctx, "")
	if err != nil {
		return err
	}
	p, err := d.Plan(ctx, nodes)
	if err != nil {
		return cli.ClassifyClusterErr(err, md, "planning the drain")
	}
	rep := newPlanReport(md, p, o)
	if o.Print.Quiet {
		return cli.Findings(rep.Summary.Blocking)
	}
	if o.Print.Structured() {
		if err := cli.PrintStructured(o.Out, o.Print.Output, rep); err != nil {
			return err
		}
	} else if err := printPlan(o.Out, rep, o.Print.TableOptions(), o.colorizer()); err != nil {
		return err
	}
	return cli.Findings(rep.Summary.Blocking)
}

// RunDrain drains the nodes.
func (o *Options) RunDrain(ctx context.Context) error {
	md, nodes, err := o.connectNodes(ctx)
	if err != nil {
		return err
	}
	if err := o.refuseInferenceResume(ctx, md, nodes); err != nil {
		return err
	}
	d, err := o.drainer(ctx, o.requester(ctx))
	if err != nil {
		return err
	}
	prog := o.progress()
	states := map[string]gang.NodeState{}
	stopped := 0
	var mu sync.Mutex
	d.OnEvent = func(e gang.Event) {
		mu.Lock()
		defer mu.Unlock()
		prog.Event("%s", eventLine(e))
		if e.Type == gang.EventNode && e.State != "" {
			states[e.Node] = e.State
		}
		if e.Type == gang.EventGang && strings.HasPrefix(e.Message, "stopped:") {
			stopped++
		}
		drained := 0
		for _, s := range states {
			if s == gang.NodeDrained {
				drained++
			}
		}
		// Redrawn on a terminal only.
		prog.Update("%d/%s drained, %s stopped", drained, cli.Plural(len(nodes), "node"), cli.Plural(stopped, "gang"))
	}
	if o.DisableEviction && !o.DryRun && !o.Print.Quiet {
		c := o.Print.Colorizer(o.ErrOut)
		fmt.Fprintln(o.ErrOut, c.Red(c.Bold("WARNING: --disable-eviction is BREAK-GLASS: pods are DELETED, PodDisruptionBudgets are NOT honoured.")))
		fmt.Fprintln(o.ErrOut, c.Red("WARNING: each node records who used it ("+gang.AnnDisableEviction+")."))
	}
	runCtx, cancel := o.withTimeout(ctx)
	defer cancel()
	res, err := d.Run(runCtx, nodes)
	prog.Done()
	if res != nil && !o.Print.Quiet {
		rep := newRunReport(md, res)
		if o.Print.Structured() {
			if perr := cli.PrintStructured(o.Out, o.Print.Output, rep); perr != nil {
				return perr
			}
		} else if perr := printRun(o.Out, rep, o.Print.TableOptions(), o.colorizer()); perr != nil {
			return perr
		}
	}
	hint := "kubectl gang-drain status"
	if res != nil {
		hint = fmt.Sprintf("kubectl gang-drain status %s, then run the same command again to resume", res.RunID)
	}
	if err != nil && runCtx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("%w: stopped after --timeout %s", gang.ErrIncomplete, o.Timeout)
	}
	return finish(runCtx, err, md, hint)
}

// RunStatus prints the runs recorded in the cluster.
func (o *Options) RunStatus(ctx context.Context) error {
	md, err := cli.Connect(ctx, o.cg)
	if err != nil {
		return err
	}
	d, err := o.drainer(ctx, "")
	if err != nil {
		return err
	}
	run := ""
	if len(o.Args) > 0 {
		run = o.Args[0]
	}
	runs, err := d.Status(ctx, run)
	if err != nil {
		return cli.ClassifyClusterErr(err, md, "reading gang-drain state")
	}
	if run != "" && len(runs) == 0 {
		return cli.WithHint(cli.Usagef("no run %q is recorded on any node", run), "kubectl gang-drain status")
	}
	rep := StatusReport{Header: cli.NewHeader("GangDrainStatus", md), Items: runs}
	if rep.Items == nil {
		rep.Items = []gang.RunSummary{}
	}
	if o.Print.Quiet {
		return nil
	}
	if o.Print.Structured() {
		return cli.PrintStructured(o.Out, o.Print.Output, rep)
	}
	if len(runs) == 0 {
		return o.Print.PrintSummary(o.Out, false, "No gang-drain runs found.")
	}
	return printStatus(o.Out, rep, o.Print.TableOptions(), o.colorizer())
}

// withTimeout bounds ctx by --timeout, when set.
func (o *Options) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if o.Timeout > 0 {
		return context.WithTimeout(ctx, o.Timeout)
	}
	return ctx, func() {}
}

// RunRestore undoes a run.
func (o *Options) RunRestore(ctx context.Context) error {
	md, err := cli.Connect(ctx, o.cg)
	if err != nil {
		return err
	}
	d, err := o.drainer(ctx, "")
	if err != nil {
		return err
	}
	nodes, err := gang.ResolveRestoreTargets(ctx, d, o.Args)
	switch {
	case err != nil && strings.Contains(err.Error(), "neither a run id nor a node") && len(o.Args) == 1 && o.RunID == "":
		// A run whose nodes are all gone (a provider replaced them): its
		// gangs are found by the records on them.
		d.Options.RunID, nodes = o.Args[0], nil
	case err != nil && strings.Contains(err.Error(), "neither a run id nor a node"):
		return cli.WithHint(cli.UsageErr(err), "kubectl gang-drain status")
	case err != nil:
		return cli.ClassifyClusterErr(err, md, "resolving restore targets")
	}
	prog := o.progress()
	d.OnEvent = func(e gang.Event) { prog.Event("%s", eventLine(e)) }
	restoreCtx, cancel := o.withTimeout(ctx)
	defer cancel()
	res, err := d.Restore(restoreCtx, nodes)
	prog.Done()
	var surges []inference.SurgeOutcome
	if errors.Is(err, gang.ErrUnknownRun) && o.inf.Inference {
		// The provider replaced every node and the run stopped no gang:
		// what is left of it is the surge on its Deployments, found by
		// their label.
		var serr error
		if surges, serr = o.undoSurges(restoreCtx, nil, []string{d.Options.RunID}); serr != nil {
			return cli.ClassifyClusterErr(serr, md, "scaling back the surge")
		}
		if len(surges) > 0 {
			res, err = &gang.RestoreResult{RunIDs: []string{d.Options.RunID}, DryRun: o.DryRun, Complete: true}, nil
		}
	}
	if errors.Is(err, gang.ErrUnknownRun) {
		return cli.WithHint(cli.UsageErr(fmt.Errorf("%q is neither a run id nor a node", o.Args[0])), "kubectl gang-drain status")
	}
	if res != nil && surges == nil {
		var serr error
		surges, serr = o.undoSurges(restoreCtx, nodes, res.RunIDs)
		if serr != nil && err == nil {
			err = serr
		}
	}
	if res != nil && !o.Print.Quiet {
		rep := RestoreReport{Header: cli.NewHeader("GangDrainRestore", md), RestoreResult: res, Surges: surges}
		if o.Print.Structured() {
			if perr := cli.PrintStructured(o.Out, o.Print.Output, rep); perr != nil {
				return perr
			}
		} else if perr := printRestore(o.Out, rep, o.Print.TableOptions(), o.colorizer()); perr != nil {
			return perr
		}
	}
	return finish(ctx, err, md, "kubectl gang-drain restore "+strings.Join(o.Args, " "))
}

// undoSurges scales back the model Deployments surged by the restored runs
// that were --inference runs (recorded on their nodes, or --inference),
// after the nodes are uncordoned.
func (o *Options) undoSurges(ctx context.Context, nodes, runIDs []string) ([]inference.SurgeOutcome, error) {
	runs := runIDs
	if !o.inf.Inference {
		var err error
		if runs, err = inferenceRuns(ctx, o, nodes, false); err != nil {
			return nil, fmt.Errorf("reading the nodes' inference runs: %w", err)
		}
	}
	if len(runs) == 0 {
		return nil, nil
	}
	kube, err := o.cg.Kube()
	if err != nil {
		return nil, err
	}
	outs, err := inference.UndoRuns(ctx, kube, runs, o.DryRun, o.clock.Now())
	for _, s := range outs {
		if !o.Print.Quiet {
			fmt.Fprintf(o.ErrOut, "model %s: surge of run %s %s (%d -> %d replicas)\n", s.Deployment, s.Run, s.Action, s.ReplicasNow, s.ReplicasAfter)
		}
	}
	return outs, err
}
