package skew

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
)

// ---- end

type fleetEndOptions struct {
	runFlags
	Print    *cli.PrintFlags
	Workflow string
	Phase    string

	cg   cli.ClientGetter
	deps deps
	genericiooptions.IOStreams
}

func newFleetEndCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams, d deps) *cobra.Command {
	o := &fleetEndOptions{Print: cli.NewPrintFlags(cli.OutputTable, cli.OutputJSON, cli.OutputYAML), deps: d, IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "end --run RUN --workflow NAME --phase PHASE",
		Short: "Record in the store how a run's Workflow ended (the rendered Workflow's exit handler runs it)",
		Long: templates.LongDesc(`
			Record in the run's store how one of its Workflows ended: its name, its
			phase (Succeeded, Failed or Error, Argo's {{workflow.status}}) and the
			time. The Workflow that render writes runs this as its exit handler
			(onExit), so the store knows a run's engine stopped even after Argo
			deleted the Workflow. Each end is a new record; nothing is overwritten.`),
		Example: templates.Examples(`
			kubectl skew fleet end --store s3://gpufleet-state/prod --run 2026-12-v1-38 --workflow gpu-2026-12-v1-38 --phase Succeeded`),
		Args: cobra.NoArgs,
		RunE: cli.RunE(cg, o),
	}
	o.Print.AddFlags(cmd)
	o.add(cmd, false)
	cmd.Flags().StringVar(&o.Workflow, "workflow", o.Workflow, "The Workflow that ended ({{workflow.name}}).")
	cmd.Flags().StringVar(&o.Phase, "phase", o.Phase, "How it ended: Succeeded, Failed or Error ({{workflow.status}}).")
	return cmd
}

func (o *fleetEndOptions) Complete(cg cli.ClientGetter, cmd *cobra.Command, _ []string) error {
	o.cg = cg
	cli.SetQuiet(cg, o.Print.Quiet)
	return o.load(cmd)
}

func (o *fleetEndOptions) Validate() error {
	if err := o.Print.Validate(); err != nil {
		return err
	}
	return fleetrun.ValidRun(o.RunName)
}

func (o *fleetEndOptions) Run(ctx context.Context) error {
	p, err := o.programme(ctx, o.cg, o.deps, o.ErrOut)
	if err != nil {
		return err
	}
	defer closeProgramme(p)
	e, err := p.RecordEnd(ctx, o.Workflow, o.Phase)
	if err != nil {
		return err
	}
	if o.Print.Quiet {
		return nil
	}
	if o.Print.Structured() {
		return cli.PrintStructured(o.Out, o.Print.Output, e)
	}
	_, err = fmt.Fprintf(o.Out, "run %s: workflow %s ended %s at %s (%s)\n", e.Run, e.Workflow, e.Phase, e.At.Format("2006-01-02T15:04:05Z"), e.Key)
	return err
}
