package fleetfile

import (
	"bytes"
	"fmt"
	"text/template"

	"github.com/google/shlex"
)

// CommandVars are what a command template may use.
type CommandVars struct {
	// Run is the programme run's name.
	Run string
	// Cluster is the fleet cluster's name; Context its kubeconfig
	// context and Kubeconfig the kubeconfig file the step uses.
	Cluster, Context, Kubeconfig string
	// Step is the step's name (control-plane-1-38, pool-gpu-a-1-38-upgrade).
	Step string
	// Version is what the step moves to: vMAJOR.MINOR, or the target's
	// full version on the step that reaches the target minor when the
	// target names a patch. Minor is always MAJOR.MINOR.
	Version, Minor string
	// Pool is the node pool of a pool step and Selector the label
	// selector of its nodes.
	Pool, Selector string
}

// ExpandCommand splits a command template into words as a shell does
// (quotes, backslashes; no variables, globs or pipes) and then fills each
// word from vars, so a value with spaces stays one argument.
func ExpandCommand(tmpl string, vars CommandVars) ([]string, error) {
	words, err := shlex.Split(tmpl)
	if err != nil {
		return nil, fmt.Errorf("splitting the command into words: %w", err)
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("the command is empty")
	}
	out := make([]string, 0, len(words))
	for _, w := range words {
		t, err := template.New("command").Option("missingkey=error").Parse(w)
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, vars); err != nil {
			return nil, err
		}
		out = append(out, b.String())
	}
	return out, nil
}

// CheckCommandTemplate reports a template that cannot be split or that
// names a field CommandVars lacks ("" is fine: not set).
func CheckCommandTemplate(tmpl string) error {
	if tmpl == "" {
		return nil
	}
	_, err := ExpandCommand(tmpl, CommandVars{})
	return err
}
