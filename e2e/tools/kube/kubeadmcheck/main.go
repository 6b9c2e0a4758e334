// Command kubeadmcheck checks a kubeadm command line the way kubeadm
// itself reads it, without running it: kubeadm's own cobra command tree
// parses the words (an unknown command, flag or argument fails as it does
// in kubeadm), and for kubeadm upgrade apply kubeadm's own version-skew
// policy (phases/upgrade.EnforceVersionPolicies) judges the target against
// the cluster, kubeadm and kubelet versions given. It is built from the
// same k8s.io/kubernetes release as the e2e control plane.
//
//	kubeadmcheck -cluster v1.36.4 -kubeadm v1.37.2 -kubelets v1.36.4,v1.35.5 -- upgrade apply v1.37.2 --yes
//
// It prints one JSON object: the command's path, whether it would prompt
// (read the next line of standard input), and the errors kubeadm would
// stop with.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
	kubeadmcmd "k8s.io/kubernetes/cmd/kubeadm/app/cmd"
	"k8s.io/kubernetes/cmd/kubeadm/app/phases/upgrade"
)

type result struct {
	Command string   `json:"command"`
	Prompts bool     `json:"prompts"`
	Errors  []string `json:"errors,omitempty"`
}

// versions answers upgrade.VersionGetter from the flags.
type versions struct {
	cluster, kubeadm string
	kubelets         []string
}

func parse(s string) (string, *version.Version, error) {
	v, err := version.ParseSemantic(s)
	return s, v, err
}

func (v versions) ClusterVersion() (string, *version.Version, error) { return parse(v.cluster) }
func (v versions) KubeadmVersion() (string, *version.Version, error) { return parse(v.kubeadm) }
func (v versions) VersionFromCILabel(string, string) (string, *version.Version, error) {
	return "", nil, errors.New("no CI labels here")
}
func (v versions) KubeletVersions() (map[string][]string, error) {
	out := map[string][]string{}
	for i, k := range v.kubelets {
		out[k] = append(out[k], fmt.Sprintf("node-%d", i))
	}
	return out, nil
}
func (v versions) ComponentVersions(string) (map[string][]string, error) {
	return map[string][]string{v.cluster: {"control-plane"}}, nil
}
func (v versions) DNSAddonVersion() (string, error) { return "v1.12.1", nil }

func main() {
	var vs versions
	var kubelets string
	flag.StringVar(&vs.cluster, "cluster", "", "the cluster's (apiserver) version")
	flag.StringVar(&vs.kubeadm, "kubeadm", "", "the installed kubeadm's version")
	flag.StringVar(&kubelets, "kubelets", "", "the kubelet versions of the cluster's nodes, comma-separated")
	flag.Parse()
	if kubelets != "" {
		vs.kubelets = strings.Split(kubelets, ",")
	}
	// EnforceVersionPolicies prints its progress on standard output: keep
	// that for the result.
	out := os.Stdout
	os.Stdout = os.Stderr
	res := check(vs, flag.Args())
	_ = json.NewEncoder(out).Encode(res)
}

func check(vs versions, args []string) result {
	root := kubeadmcmd.NewKubeadmCommand(strings.NewReader(""), io.Discard, io.Discard)
	c, rest, err := root.Find(args)
	if err != nil {
		return result{Command: "kubeadm", Errors: []string{err.Error()}}
	}
	res := result{Command: c.CommandPath()}
	if err := c.ParseFlags(rest); err != nil {
		res.Errors = append(res.Errors, err.Error())
		return res
	}
	pos := c.Flags().Args()
	if err := c.ValidateArgs(pos); err != nil {
		res.Errors = append(res.Errors, err.Error())
		return res
	}
	if !c.Runnable() {
		res.Errors = append(res.Errors, c.CommandPath()+" is not a command that runs: it has subcommands only")
		return res
	}
	flagSet := func(name string) bool {
		f := c.Flags().Lookup(name)
		return f != nil && f.Changed && f.Value.String() == "true"
	}
	if c.CommandPath() == "kubeadm upgrade apply" {
		// SessionIsInteractive (cmd/upgrade/apply.go): without -y, -f or
		// --dry-run the preflight phase asks "[upgrade] Are you sure you
		// want to proceed? [y/N]" on standard input.
		res.Prompts = !(flagSet("yes") || flagSet("force") || flagSet("dry-run"))
		if len(pos) == 0 {
			res.Errors = append(res.Errors, "no version to upgrade to")
			return res
		}
		target, v, err := parse(pos[0])
		if err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("version %q: %v", pos[0], err))
			return res
		}
		skew := upgrade.EnforceVersionPolicies(vs, target, v, false, false)
		if skew == nil {
			return res
		}
		for _, e := range skew.Mandatory {
			res.Errors = append(res.Errors, e.Error())
		}
		if !flagSet("force") {
			for _, e := range skew.Skippable {
				res.Errors = append(res.Errors, e.Error()+" (kubeadm stops unless --force)")
			}
		}
	}
	return res
}
