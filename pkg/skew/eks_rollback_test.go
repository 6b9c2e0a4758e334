package skew

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// eksNodegroups is a stand-in for the EKS endpoint of the node group
// operations the rollback of a custom-AMI node group calls, in the
// rest-json protocol of botocore's data/eks/2017-11-01/service-2.json
// (CreateNodegroup POST /clusters/{name}/node-groups, DescribeNodegroup
// GET and DeleteNodegroup DELETE /clusters/{name}/node-groups/{nodegroupName},
// errors by x-amzn-ErrorType). It keeps the node groups by name and
// records each CreateNodegroup body as the aws CLI sent it.
type eksNodegroups struct {
	mu      sync.Mutex
	groups  map[string]map[string]any
	created []map[string]any
	deleted []string
}

var ngPath = regexp.MustCompile(`^/clusters/([^/]+)/node-groups(?:/([^/]+))?$`)

func (e *eksNodegroups) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := ngPath.FindStringSubmatch(r.URL.Path)
	if m == nil {
		http.Error(w, "no such operation: "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
		return
	}
	reply := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	name := m[2]
	switch {
	case r.Method == http.MethodPost && name == "":
		body, _ := io.ReadAll(r.Body)
		var in map[string]any
		if err := json.Unmarshal(body, &in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		e.created = append(e.created, in)
		ng := map[string]any{"clusterName": m[1], "status": "ACTIVE"}
		for k, v := range in {
			ng[k] = v
		}
		e.groups[in["nodegroupName"].(string)] = ng
		reply(map[string]any{"nodegroup": ng})
	case name != "" && e.groups[name] == nil:
		w.Header().Set("x-amzn-ErrorType", "ResourceNotFoundException")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"message":"No node group found for name: `+name+`."}`)
	case r.Method == http.MethodGet && name != "":
		reply(map[string]any{"nodegroup": e.groups[name]})
	case r.Method == http.MethodDelete && name != "":
		e.deleted = append(e.deleted, name)
		ng := e.groups[name]
		delete(e.groups, name)
		ng["status"] = "DELETING"
		reply(map[string]any{"nodegroup": ng})
	default:
		http.Error(w, "no such operation: "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
	}
}

// TestRunbookEKSNodegroupRollback runs the rollback of a custom-AMI EKS
// managed node group through the real aws CLI and bash against a local
// endpoint: EKS takes no node group back to an earlier AMI in place, so
// the rollback creates a node group from the launch template version in
// use before the step, by launch template name and version (not both name
// and id), with no Kubernetes version (a custom AMI's node group fails
// with one), a valid node group name, and the failed group's role,
// subnets, size, capacity type, labels, taints, tags, update and node
// repair settings as describe-nodegroup printed them, all in the one JSON
// document of --cli-input-json (no list passed as an unquoted expansion,
// which zsh does not split), a setting the group lacks left out rather than
// sent as null; then, after the pool moved, deletes the failed group and
// waits for it to go. The blocks run in bash, and in zsh where it is
// installed.
func TestRunbookEKSNodegroupRollback(t *testing.T) {
	if _, err := exec.LookPath("aws"); err != nil {
		t.Skip("aws is not installed")
	}
	s := stepOf(t, variantPlan(t, "eks-managed"), PhaseNodePool, "gpu-p5")
	if s.Rollback == nil || len(s.Rollback.Blocks) != 3 {
		t.Fatalf("want 3 rollback blocks (create, move, delete):\n%s", rollbackText(s))
	}
	text := rollbackText(s)
	wantIn(t, "rollback", text, "no --kubernetes-version, which fails with a custom AMI")
	var commands []string
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "#") {
			commands = append(commands, l)
		}
	}
	wantNotIn(t, "rollback commands", strings.Join(commands, "\n"), "update-nodegroup-version", "--kubernetes-version", "--release-version", "id=",
		"--subnets", "--node-role", "--capacity-type", "$SUBNETS", "< <(")
	// The cost of a second copy of the pool, and what to do without room.
	wantIn(t, "rollback", text, "a second copy of the pool: twice its instances (for a GPU pool, twice its GPUs)", "Without room for that")
	create, move, del := s.Rollback.Blocks[0].Commands, s.Rollback.Blocks[1].Commands, s.Rollback.Blocks[2].Commands
	// The pool moves after the new group is validated, in one chain.
	m := strings.Join(move, "\n")
	if v, d, r := strings.Index(m, `kubectl gpu-validate nodes -l eks.amazonaws.com/nodegroup="$BACK" --kubelet-version v1.35 --xid --dcgm && \`),
		strings.Index(m, `kubectl gang-drain run -l eks.amazonaws.com/nodegroup="$NG"`), strings.Index(m, "kubectl gang-drain restore"); v < 0 || d < v || r < d {
		t.Errorf("move: want validate && drain && restore:\n%s", m)
	}

	// script is a block as pasted, its placeholders filled, up to its
	// first kubectl line (the cluster's side is not here).
	script := func(lines []string, ng string) string {
		var out []string
		for _, l := range lines {
			if strings.HasPrefix(l, "kubectl ") {
				break
			}
			l = strings.ReplaceAll(l, "'<version-in-use>'", "7")
			if strings.HasPrefix(l, "NG=") {
				l = "NG=" + ng + "   # the failed node group"
			}
			out = append(out, l)
		}
		last := len(out) - 1
		out[last] = strings.TrimSuffix(out[last], " && \\")
		return strings.Join(out, "\n") + "\n"
	}
	long := strings.Repeat("gpu-p5-", 8) + "reserved-h100" // 69 characters, as EKS would not take
	long = long[:63]
	shells := []string{"bash"}
	if _, err := exec.LookPath("zsh"); err == nil {
		shells = append(shells, "zsh")
	}
	type tcase struct {
		name, ng, back         string
		labels, taints, extras bool
	}
	var cases []tcase
	for _, sh := range shells {
		for _, tc := range []tcase{
			{"labelled and tainted", "gpu-p5", "gpu-p5-v1-35", true, true, true},
			{"no labels, taints, tags or settings", "gpu-p5", "gpu-p5-v1-35", false, false, false},
			{"a name of 63 characters", long, long[:57] + "-v1-35", true, false, false},
		} {
			tc.name = sh + " " + tc.name
			cases = append(cases, tc)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := map[string]any{
				"nodegroupName": tc.ng, "clusterName": "train-prod", "version": "1.36", "releaseVersion": "ami-0abc",
				"status": "ACTIVE", "capacityType": "ON_DEMAND", "amiType": "CUSTOM",
				"nodeRole":       "arn:aws:iam::111122223333:role/gpu-nodes",
				"subnets":        []any{"subnet-0e2907431c9988b72", "subnet-04ad87f71c6e5ab4d"},
				"scalingConfig":  map[string]any{"minSize": float64(2), "maxSize": float64(8), "desiredSize": float64(8)},
				"launchTemplate": map[string]any{"name": "gpu-p5-lt", "version": "8", "id": "lt-0123456789abcdef0"},
			}
			if tc.labels {
				old["labels"] = map[string]any{"gpufleet.dev/pool": "gpu-p5"}
			}
			if tc.taints {
				old["taints"] = []any{map[string]any{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}}
			}
			if tc.extras {
				old["tags"] = map[string]any{"team": "ml", "aws:cloudformation:stack-name": "eksctl-train-prod-nodegroup-gpu-p5"}
				old["instanceTypes"] = []any{"p5.48xlarge"}
				old["updateConfig"] = map[string]any{"maxUnavailablePercentage": float64(25)}
				old["nodeRepairConfig"] = map[string]any{"enabled": true}
			}
			api := &eksNodegroups{groups: map[string]map[string]any{tc.ng: old}}
			srv := httptest.NewServer(api)
			defer srv.Close()
			dir := t.TempDir()
			env := append(cliEnv(dir), "AWS_ENDPOINT_URL="+srv.URL)
			for i, lines := range [][]string{create, del} {
				cmd := exec.Command(strings.Fields(tc.name)[0], "-c", "set -o pipefail\n"+script(lines, tc.ng))
				cmd.Env = env
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("block %d: %v\n%s\n%s", i+1, err, script(lines, tc.ng), out)
				}
			}
			if len(api.created) != 1 {
				t.Fatalf("%d CreateNodegroup requests, want 1", len(api.created))
			}
			got := api.created[0]
			// The CLI's own idempotency token (CreateNodegroup clientRequestToken).
			if tok, _ := got["clientRequestToken"].(string); tok == "" {
				t.Errorf("no clientRequestToken: %v", got)
			}
			delete(got, "clientRequestToken")
			want := map[string]any{
				"nodegroupName":  tc.back,
				"nodeRole":       old["nodeRole"],
				"subnets":        old["subnets"],
				"scalingConfig":  old["scalingConfig"],
				"capacityType":   "ON_DEMAND",
				"launchTemplate": map[string]any{"name": "gpu-p5-lt", "version": "7"},
				"labels":         map[string]any{},
				"taints":         []any{},
			}
			// Tags stay behind: eksctl's groups carry AWS-reserved aws:*
			// keys, which create-nodegroup refuses.
			if tc.extras {
				for _, k := range []string{"instanceTypes", "updateConfig", "nodeRepairConfig"} {
					want[k] = old[k]
				}
			}
			if tc.labels {
				want["labels"] = old["labels"]
			}
			if tc.taints {
				want["taints"] = old["taints"]
			}
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(want)
			if string(gj) != string(wj) {
				t.Errorf("CreateNodegroup sent\n  %s\nwant\n  %s", gj, wj)
			}
			if n := got["nodegroupName"].(string); len(n) > 63 || !regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9_-]*$`).MatchString(n) {
				t.Errorf("node group name %q is not one EKS takes", n)
			}
			if strings.Join(api.deleted, " ") != tc.ng || api.groups[tc.ng] != nil || api.groups[tc.back] == nil {
				t.Errorf("deleted %q; groups left %v", api.deleted, api.groups)
			}
		})
	}
}

// A custom-AMI node group without GPUs moves onto the new group by
// kubectl drain one node at a time, never a pool-wide drain, and the
// block parses as bash.
func TestRunbookEKSNodegroupRollbackCPU(t *testing.T) {
	inv := variantInventory(t, "eks-managed")
	zero := 0
	for i := range inv.Pools {
		if inv.Pools[i].Name == "gpu-p5" {
			inv.Pools[i].GPUNodes = &zero
		}
	}
	s := stepOf(t, planOf(t, inv, "v1.38", ""), PhaseNodePool, "gpu-p5")
	if s.Rollback == nil || len(s.Rollback.Blocks) != 3 {
		t.Fatalf("want 3 rollback blocks (create, move, delete):\n%s", rollbackText(s))
	}
	move := strings.Join(s.Rollback.Blocks[1].Commands, "\n")
	wantIn(t, "move", move, `NG=gpu-p5`, `kubectl get nodes -l eks.amazonaws.com/nodegroup="$NG" -o name | while read -r NODE; do kubectl drain "$NODE" --ignore-daemonsets --delete-emptydir-data --timeout=1h || break; done`)
	// No exit: zsh runs a pipeline's last command in the pasting shell,
	// which exit would close.
	wantNotIn(t, "move", move, "gang-drain", "kubectl drain -l", "exit")
	for i, b := range s.Rollback.Blocks {
		if out, err := exec.Command("bash", "-n", "-c", strings.Join(b.Commands, "\n")).CombinedOutput(); err != nil {
			t.Errorf("block %d does not parse: %v\n%s", i+1, err, out)
		}
	}
}
