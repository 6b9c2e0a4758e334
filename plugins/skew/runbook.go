package skew

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// addRunbookFlags registers --provider and --runbook on the plan.
func addRunbookFlags(cmd *cobra.Command, o *PlanOptions) {
	var names []string
	for _, p := range pkgskew.Providers {
		names = append(names, string(p))
	}
	cmd.Flags().StringVar(&o.Provider, "provider", o.Provider, "Write the commands for this provider instead of the detected one: "+strings.Join(names, ", ")+".")
	cmd.Flags().BoolVar(&o.Runbook, "runbook", o.Runbook, "Print the plan as a Markdown runbook: numbered steps, one sh block of commands each.")
	cmd.Flags().StringArrayVar(&o.ASG, "asg", o.ASG, "POOL=GROUP: the EC2 Auto Scaling group that makes node pool POOL's nodes (repeat for each pool); the pool is then replaced from a new AMI by an instance refresh instead of upgraded in place.")
	_ = cmd.RegisterFlagCompletionFunc("provider", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return names, cobra.ShellCompDirectiveNoFileComp
	})
}

// validateRunbook checks --provider and --runbook.
func (o *PlanOptions) validateRunbook() error {
	if o.Provider != "" {
		p, err := pkgskew.ParseProvider(o.Provider)
		if err != nil {
			return fmt.Errorf("--provider: %w", err)
		}
		o.provider = p
	}
	for _, a := range o.ASG {
		pool, group, ok := strings.Cut(a, "=")
		if !ok || pool == "" || group == "" {
			return fmt.Errorf("--asg %q: want POOL=GROUP, such as --asg gpu-a=gpu-a-asg", a)
		}
		if o.asgs == nil {
			o.asgs = map[string]string{}
		}
		o.asgs[pool] = group
	}
	if o.Runbook && o.Print.Output != "" && o.Print.Output != cli.OutputTable {
		return fmt.Errorf("--runbook prints Markdown: leave out -o %s", o.Print.Output)
	}
	return nil
}

// printPlanCommands lists each step's commands under the table (-o wide).
func printPlanCommands(w io.Writer, rep *PlanReport) {
	fmt.Fprintf(w, "\nCOMMANDS (%s)\n", providerLine(rep.Provider))
	for _, s := range rep.Steps {
		if len(s.Commands) == 0 {
			continue
		}
		fmt.Fprintf(w, "step %d:\n", s.Number)
		for _, c := range s.Commands {
			fmt.Fprintf(w, "  %s\n", c)
		}
	}
}

func providerLine(d pkgskew.Detection) string {
	if d.Source == "--provider" {
		return d.Provider.Title() + ", chosen with --provider"
	}
	line := d.Provider.Title() + ", detected"
	if len(d.Evidence) > 0 {
		line += ": " + strings.Join(d.Evidence, "; ")
	}
	return line
}

// pasteNote says which shells take the blocks as pasted. An interactive
// zsh (macOS's login shell) reads # as a word, not a comment, unless
// INTERACTIVE_COMMENTS is set ("Allow comments even in interactive
// shells", zshoptions(1), zsh 5.9): a pasted "# ..." line fails as a
// command, and "VAR=value   # note" runs # with VAR in its environment
// instead of setting VAR.
const pasteNote = "Paste each block into bash, or into zsh after `setopt interactive_comments sh_word_split` (without them an interactive zsh runs the blocks' `# ...` comments as commands, a `VAR=value   # note` line sets nothing, and `$NODES` stays one word where a block passes several nodes)."

// A step with a way back declares its trigger right under its heading,
// before any of its commands (triggerHead, the trigger, triggerThen), and
// ends with its rollback blocks under rollbackHead. The runbook lane
// (e2e/runbook) tells the rollback blocks by rollbackHead.
const (
	triggerHead  = "Roll back if"
	triggerThen  = "stop there and follow this step's rollback, at its end, instead of going on."
	rollbackHead = "Rollback, only if the trigger above fired (otherwise go on to the next step):"
)

// printRunbook writes the plan as a Markdown runbook for a change ticket:
// one numbered step per plan step, each with its why and its fenced sh
// blocks of commands. Where the plan cannot tell which of two ways applies
// (the node's OS family, who manages an add-on), each way is a block of
// its own under a line that says how to tell, so that no pasted block
// runs both.
func printRunbook(w io.Writer, rep *PlanReport) error {
	var b strings.Builder
	s := rep.Summary
	fmt.Fprintf(&b, "# Upgrade from %s to %s\n\n", s.From, s.Target)
	fmt.Fprintf(&b, "Provider: %s.\n\n", providerLine(rep.Provider))
	b.WriteString(pasteNote + "\n\n")
	hops := "hops"
	if s.Hops == 1 {
		hops = "hop"
	}
	fmt.Fprintf(&b, "%d control-plane %s; %d pool upgrades (%d node drains) instead of %d (%d) when nodes follow every hop.\n",
		s.Hops, hops, s.PoolUpgrades, s.NodeDisruptions, s.PoolUpgradesEveryHop, s.NodeDisruptionsEveryHop)
	if len(rep.Warnings) > 0 {
		b.WriteString("\nBefore you start:\n\n")
		for _, wn := range rep.Warnings {
			fmt.Fprintf(&b, "- %s\n", wn)
		}
	}
	b.WriteString("\n## Steps\n\n")
	for _, st := range rep.Steps {
		head := fmt.Sprintf("%d. **%s %s**", st.Number, st.Phase, st.ControlPlane)
		if st.Pool != "" {
			head = fmt.Sprintf("%d. **%s %s**", st.Number, st.Phase, st.Pool)
		}
		fmt.Fprintf(&b, "%s: %s", head, st.Action)
		if st.Status != pkgskew.StatusOK {
			fmt.Fprintf(&b, " (%s)", st.Status.Word())
		}
		b.WriteString("\n")
		// The trigger comes before the step's commands, so that a reader
		// pasting top down knows when to stop before acting; the rollback
		// blocks close the step, under a line of their own.
		if rb := st.Rollback; rb != nil {
			fmt.Fprintf(&b, "\n   %s %s: %s\n", triggerHead, rb.Trigger, triggerThen)
		}
		if st.Note != "" {
			fmt.Fprintf(&b, "\n   %s\n", st.Note)
		}
		writeBlocks(&b, st.Blocks)
		if rb := st.Rollback; rb != nil {
			fmt.Fprintf(&b, "\n   %s\n", rollbackHead)
			writeBlocks(&b, rb.Blocks)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, strings.TrimRight(b.String(), "\n")+"\n")
	return err
}

// writeBlocks writes a step's blocks: one fenced sh block each, the
// alternatives of a choice under a line that names the choice and, each,
// a line that says when it is the one to run.
func writeBlocks(b *strings.Builder, bs []pkgskew.Block) {
	for i, bl := range bs {
		if bl.Choice != "" {
			if i == 0 || bs[i-1].Choice != bl.Choice {
				n := 0
				for j := i; j < len(bs) && bs[j].Choice == bl.Choice; j++ {
					n++
				}
				fmt.Fprintf(b, "\n   Run one of the next %s, by %s:\n", cli.Plural(n, "block"), bl.Choice)
			}
			fmt.Fprintf(b, "\n   Only if %s:\n", bl.When)
		}
		if commentsOnly(bl.Commands) {
			// Nothing to paste: the comments are the reader's directions.
			b.WriteString("\n")
			for _, c := range bl.Commands {
				fmt.Fprintf(b, "   %s\n", strings.TrimSpace(strings.TrimPrefix(c, "#")))
			}
			continue
		}
		b.WriteString("\n   ```sh\n")
		for _, c := range bl.Commands {
			fmt.Fprintf(b, "   %s\n", c)
		}
		b.WriteString("   ```\n")
	}
}

func commentsOnly(lines []string) bool {
	for _, l := range lines {
		if !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}
