package skew

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"mvdan.cc/sh/v3/syntax"
)

// The provider CLIs the runbook writes for. Each command of every
// runbook variant is run through the real CLI where it is installed, with
// fake credentials and no reachable endpoint: the CLI must get past its
// own argument parser and validation to the point where it wants an
// account or a connection (the marker), so a flag it does not know, a
// missing required argument or a value it refuses fails the test. Commands
// are tried once per distinct shape (the subcommand and its flags), with
// placeholders filled by sample values.
var cliMarkers = map[string]*regexp.Regexp{
	// aws-cli 1.x: request built, no endpoint.
	"aws": regexp.MustCompile(`Could not connect to the endpoint URL`),
	// gcloud: arguments parsed, no account.
	"gcloud": regexp.MustCompile(`You do not currently have an active account selected`),
	// azure-cli: arguments parsed and validated, no login.
	"az": regexp.MustCompile(`Please run 'az login' to setup account`),
	// clusterctl (v1.14.0): flags parsed, no management cluster; a flag
	// it does not know is "unknown flag".
	"clusterctl": regexp.MustCompile(`clusterctl requires either a valid kubeconfig or in cluster config to connect to the management cluster`),
}

// cliCall is one provider CLI command found in a block.
type cliCall struct {
	where string
	argv  []string
}

// shape is the command with its flag names only, to run each shape once.
func (c cliCall) shape() string {
	var parts []string
	for i, a := range c.argv {
		switch {
		case strings.HasPrefix(a, "-"):
			name, _, _ := strings.Cut(a, "=")
			parts = append(parts, name)
		case i < 4 && !strings.Contains(a, "sample"):
			parts = append(parts, a)
		}
	}
	return strings.Join(parts, " ")
}

var placeholder = regexp.MustCompile(`<[a-z0-9-]+>`)

// sample fills a placeholder with a value the CLI's own validation takes.
func sample(s string) string {
	return placeholder.ReplaceAllStringFunc(s, func(p string) string {
		switch p {
		case "<patch>":
			return "0"
		case "<region>":
			return "us-west-2"
		case "<location>":
			return "us-central1"
		}
		return "sample"
	})
}

// varSamples are the values of the runbook's variables that a CLI parses
// as a structure, in the form the command that sets them prints: the EKS
// node group rollback's describe-nodegroup --output json of eksNodegroupCopy
// (the Nodegroup shape of botocore's
// data/eks/2017-11-01/service-2.json), which create-nodegroup reads as
// --cli-input-json. TestRunbookEKSNodegroupRollback runs those describe
// calls for real.
var varSamples = map[string]string{
	"NGCONF": `{"nodeRole": "arn:aws:iam::111122223333:role/gpu-nodes", "subnets": ["subnet-0e2907431c9988b72", "subnet-04ad87f71c6e5ab4d"], "scalingConfig": {"minSize": 2, "maxSize": 8, "desiredSize": 8}, "labels": {"gpufleet.dev/pool": "gpu-p5"}, "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}], "tags": {"team": "ml"}, "capacityType": "ON_DEMAND", "updateConfig": {"maxUnavailable": 1}, "nodeRepairConfig": {"enabled": true}}`,
}

// wordValue is a shell word as the shell would pass it, with parameter
// expansions and command substitutions (their values come at run time)
// replaced by a sample.
func wordValue(w *syntax.Word) string {
	var b strings.Builder
	var part func(p syntax.WordPart, dq bool)
	part = func(p syntax.WordPart, dq bool) {
		switch x := p.(type) {
		case *syntax.Lit:
			b.WriteString(unescape(x.Value, dq))
		case *syntax.SglQuoted:
			b.WriteString(x.Value)
		case *syntax.DblQuoted:
			for _, q := range x.Parts {
				part(q, true)
			}
		case *syntax.ParamExp:
			// A variable a CLI parses as a structure holds what the
			// describe call that set it prints.
			if v, ok := varSamples[x.Param.Value]; ok && !x.Excl && x.Slice == nil && x.Repl == nil && x.Exp == nil {
				b.WriteString(v)
				return
			}
			b.WriteString("sample")
		case *syntax.CmdSubst:
			// $(date -u +...) is a timestamp when it runs.
			if len(x.Stmts) == 1 {
				if ce, ok := x.Stmts[0].Cmd.(*syntax.CallExpr); ok && len(ce.Args) > 0 && ce.Args[0].Lit() == "date" {
					b.WriteString("2026-12-06T00:00:00Z")
					return
				}
			}
			b.WriteString("sample")
		default:
			b.WriteString("sample")
		}
	}
	for _, p := range w.Parts {
		part(p, false)
	}
	return sample(b.String())
}

// unescape drops the backslashes the shell drops: before any character
// outside quotes, before $ ` " \ and a newline inside double quotes.
func unescape(s string, dq bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (!dq || strings.IndexByte("$`\"\\\n", s[i+1]) >= 0) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cliCalls returns the aws, gcloud, az and clusterctl commands of every block of the
// plans, nested command substitutions included.
func cliCalls(t *testing.T, plans map[string]Plan) []cliCall {
	var out []cliCall
	for name, p := range plans {
		for _, s := range p.Steps {
			for i, b := range stepBlocks(s) {
				f := parseBlock(t, name, b)
				if f == nil {
					continue
				}
				syntax.Walk(f, func(n syntax.Node) bool {
					ce, ok := n.(*syntax.CallExpr)
					if !ok || len(ce.Args) == 0 {
						return true
					}
					if cli := ce.Args[0].Lit(); cliMarkers[cli] != nil {
						c := cliCall{where: name + " step " + itoa(s.Number) + " block " + itoa(i+1)}
						for _, a := range ce.Args {
							c.argv = append(c.argv, wordValue(a))
						}
						out = append(out, c)
					}
					return true
				})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].where < out[j].where })
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

// cliPlans are the plans whose commands the CLIs check: every runbook
// variant, and the variants whose branches the fixtures do not reach.
func cliPlans(t *testing.T) map[string]Plan {
	plans := map[string]Plan{}
	for _, v := range variants {
		plans[v] = variantPlan(t, v)
	}
	unknown := variantInventory(t, "eks-managed")
	pf := *unknown.Platform
	pf.EKSAddons = nil
	unknown.Platform = &pf
	plans["eks add-ons not shown"] = planOf(t, unknown, "v1.38", "")
	plans["gke relabelled"] = planOf(t, relabel(variantInventory(t, "gke"), "node.kubernetes.io/pool"), "v1.38", "")
	plans["aks relabelled"] = planOf(t, relabel(variantInventory(t, "aks"), "node.kubernetes.io/pool"), "v1.38", "")
	asg, err := MakePlan(awsKubeadm(t), MustParseVersion("v1.38"), PlanOptions{ASGs: map[string]string{"gpu-h100": "gpu-h100-asg", "cpu": "cpu-asg"}})
	if err != nil {
		t.Fatal(err)
	}
	plans["kubeadm on EC2 Auto Scaling groups"] = asg
	return plans
}

// cliEnv runs a CLI with fake credentials, private config and no reachable
// endpoint.
func cliEnv(dir string) []string {
	return append(os.Environ(),
		"HOME="+dir,
		"AWS_ACCESS_KEY_ID=AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY=example", "AWS_SESSION_TOKEN=",
		"AWS_CONFIG_FILE="+filepath.Join(dir, "aws-config"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "aws-credentials"),
		"AWS_ENDPOINT_URL=http://127.0.0.1:9", "AWS_MAX_ATTEMPTS=1", "AWS_EC2_METADATA_DISABLED=true", "AWS_PAGER=",
		"CLOUDSDK_CONFIG="+filepath.Join(dir, "gcloud"), "CLOUDSDK_CORE_DISABLE_PROMPTS=0", "CLOUDSDK_CORE_PROJECT=",
		"AZURE_CONFIG_DIR="+filepath.Join(dir, "azure"), "AZURE_CORE_COLLECT_TELEMETRY=false", "AZURE_CORE_NO_COLOR=true",
		"KUBECONFIG="+filepath.Join(dir, "no-kubeconfig"), "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=")
}

// TestRunbookCommandsPassTheRealCLIs runs every aws, gcloud, az and
// clusterctl command of the runbooks through the installed CLI.
func TestRunbookCommandsPassTheRealCLIs(t *testing.T) {
	calls := cliCalls(t, cliPlans(t))
	byShape := map[string]cliCall{}
	for _, c := range calls {
		if _, ok := byShape[c.shape()]; !ok {
			byShape[c.shape()] = c
		}
	}
	var shapes []string
	for s := range byShape {
		shapes = append(shapes, s)
	}
	sort.Strings(shapes)
	t.Logf("%d commands, %d shapes", len(calls), len(shapes))
	seen := map[string]bool{}
	for _, c := range calls {
		seen[c.argv[0]] = true
	}
	for _, cli := range []string{"aws", "gcloud", "az"} {
		if !seen[cli] {
			t.Errorf("no %s command found in the runbooks: the walk over the blocks misses them", cli)
		}
	}
	dir := t.TempDir()
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, sh := range shapes {
		c := byShape[sh]
		if _, err := exec.LookPath(c.argv[0]); err != nil {
			t.Logf("%s is not installed: %s not checked", c.argv[0], sh)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			// Generous: under `make test` this runs at low priority beside the
			// e2e suite, and each CLI takes about a second of CPU to start.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
			cmd.Env = cliEnv(dir)
			cmd.Stdin = nil
			out, _ := cmd.CombinedOutput()
			if !cliMarkers[c.argv[0]].Match(out) {
				mu.Lock()
				t.Errorf("%s: %s refuses\n  %s\n%s", c.where, c.argv[0], strings.Join(c.argv, " "), out)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// Every mutating command of a provider CLI that asks for confirmation
// carries the flag that suppresses it, so that a pasted block never
// answers a prompt with its next line: gcloud --quiet ("Disable all
// interactive prompts", gcloud topic flags, Google Cloud SDK 528), az
// --yes on the commands that have it ("Do not prompt for confirmation",
// az aks upgrade --help and az aks nodepool upgrade --help, azure-cli
// 2.45).
func TestRunbookProviderCommandsTakeNoPrompt(t *testing.T) {
	mutating := regexp.MustCompile(`^(gcloud container (clusters (upgrade|update)|node-pools (complete-upgrade|create|delete|rollback))|az aks (upgrade|nodepool (upgrade|add|delete)))\b`)
	n := 0
	seen := map[string]bool{}
	for _, c := range cliCalls(t, cliPlans(t)) {
		line := strings.Join(c.argv, " ")
		if !mutating.MatchString(line) {
			continue
		}
		n++
		seen[strings.Join(c.argv[:min(4, len(c.argv))], " ")] = true
		want := "--quiet"
		if c.argv[0] == "az" {
			want = "--yes"
		}
		if !strings.Contains(" "+line+" ", " "+want+" ") {
			t.Errorf("%s: %s without %s:\n  %s", c.where, c.argv[0], want, line)
		}
	}
	if n < 4 {
		t.Errorf("only %d mutating gcloud and az commands found", n)
	}
	// The upgrades themselves are among them: GKE's control plane and
	// node pools, AKS's control plane and node pools.
	for _, want := range []string{"gcloud container clusters upgrade", "az aks upgrade --resource-group", "az aks nodepool upgrade"} {
		if !seen[want] {
			t.Errorf("no %q in the runbooks: its prompt flag is not checked (seen %v)", want, seen)
		}
	}
}

// clusterctl takes the management cluster's context as --kubeconfig-context
// and has no --context (cmd/clusterctl/cmd/describe_cluster.go,
// kubernetes-sigs/cluster-api v1.14.0): per provider, every clusterctl
// command carries the former and never the latter, and only Cluster API's
// runbook has any.
func TestRunbookClusterctlContextFlag(t *testing.T) {
	for _, tc := range []struct {
		variant string
		want    int // clusterctl commands at least
	}{
		{"kubeadm-apt", 0}, {"eks-managed", 0}, {"gke", 0}, {"aks", 0}, {"k3s-etcd", 0}, {"rke2", 0},
		{"capi", 5},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			n := 0
			for _, s := range variantPlan(t, tc.variant).Steps {
				for _, b := range stepBlocks(s) {
					f := parseBlock(t, tc.variant, b)
					if f == nil {
						continue
					}
					syntax.Walk(f, func(nd syntax.Node) bool {
						ce, ok := nd.(*syntax.CallExpr)
						if !ok || len(ce.Args) < 2 || ce.Args[0].Lit() != "clusterctl" {
							return true
						}
						n++
						var args []string
						for _, a := range ce.Args {
							args = append(args, wordValue(a))
						}
						line := strings.Join(args, " ")
						if slices.Contains(args, "--context") || !slices.Contains(args, "--kubeconfig-context") {
							t.Errorf("step %d: clusterctl without --kubeconfig-context, or with --context:\n  %s", s.Number, line)
						}
						return true
					})
				}
			}
			if (tc.want == 0) != (n == 0) || n < tc.want {
				t.Errorf("%d clusterctl commands, want %d or more (none where 0)", n, tc.want)
			}
		})
	}
}
