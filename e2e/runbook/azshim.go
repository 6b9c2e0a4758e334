package runbooke2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// azure-cli before 2.46.0 crashes in `az aks nodepool upgrade
// --kubernetes-version` before it sends a request: custom.py reads
// instance.kubernetes_version of an AgentPool, which has none
// (https://github.com/Azure/azure-cli/issues/25530, fixed by
// https://github.com/Azure/azure-cli/pull/25539 in 2.46.0). Debian 12
// packages 2.45.0. Where the installed az is older, the lane does not run
// that one command through it: an az wrapper first in PATH checks the
// pasted command's flags through the installed az's own parser (every
// flag must be one `az aks nodepool upgrade --help` lists), lists the
// command as not executed, and sends what azure-cli 2.46's
// aks_agentpool_upgrade sends (get the agent pool, set
// orchestratorVersion, create_or_update it) with `az rest`, so that the
// provider's rules and the steps after it see the upgrade. Every other
// az command goes to the installed az unchanged.
const azFixedIn = "2.46.0"

// azNotExecuted names the file the wrapper lists its commands in.
const azNotExecuted = ".az-not-executed"

// azVersion is the installed azure-cli's version ("" if az is missing).
func azVersion(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "az", "version", "--output", "json").Output()
	if err != nil {
		return ""
	}
	var v map[string]any
	if json.Unmarshal(out, &v) != nil {
		return ""
	}
	s, _ := v["azure-cli"].(string)
	return s
}

// azCrashes reports whether azure-cli v crashes in nodepool upgrade.
func azCrashes(v string) bool {
	iv, err := version.ParseGeneric(v)
	return err == nil && iv.LessThan(version.MustParseGeneric(azFixedIn))
}

// writeAzWrapper writes the az wrapper into dir, in front of the real az.
func writeAzWrapper(dir, real, installed, list string) error {
	s := `#!/bin/bash
# az wrapper of the runbook lane: see e2e/runbook/azshim.go.
real=` + shq(real) + `
if [ "$1 $2 $3" != "aks nodepool upgrade" ]; then exec "$real" "$@"; fi
shift 3
help=$("$real" aks nodepool upgrade --help) || exit 2
rg= cl= np= kv= nowait=
while [ $# -gt 0 ]; do
	a=$1; shift
	case $a in -*)
		if ! grep -Eq -- "^ +(--[a-z-]+ )*${a}( |$)" <<<"$help"; then
			echo "ERROR: unrecognized arguments: $a (az aks nodepool upgrade --help of azure-cli ` + installed + ` does not list it)" >&2; exit 2
		fi ;;
	esac
	case $a in
	--resource-group|-g) rg=$1; shift ;;
	--cluster-name) cl=$1; shift ;;
	--name|--nodepool-name|-n) np=$1; shift ;;
	--kubernetes-version|-k) kv=$1; shift ;;
	--no-wait) nowait=1 ;;
	--yes|-y|--node-image-only) ;;
	--*) case $1 in -*|"") ;; *) shift ;; esac ;;
	esac
done
if [ -z "$rg" ] || [ -z "$cl" ] || [ -z "$np" ]; then
	echo "ERROR: the following arguments are required: --resource-group/-g, --cluster-name, --name/--nodepool-name/-n" >&2; exit 2
fi
echo "not executed: az ` + installed + ` crashes in nodepool upgrade (Azure/azure-cli#25530); flags checked against its az aks nodepool upgrade --help; sent as azure-cli ` + azFixedIn + ` sends it, with az rest" >>` + shq(list) + `
sub=$("$real" account show --query id --output tsv) || exit 1
url="/subscriptions/$sub/resourceGroups/$rg/providers/Microsoft.ContainerService/managedClusters/$cl/agentPools/$np?api-version=2022-11-01"
pool=$("$real" rest --method get --url "$url") || exit 1
body=$(jq -c --arg v "$kv" 'if $v == "" then . else .properties.orchestratorVersion = $v end' <<<"$pool") || exit 1
out=json
[ -z "$nowait" ] || out=none
"$real" rest --method put --url "$url" --body "$body" --output "$out"
`
	return os.WriteFile(filepath.Join(dir, "az"), []byte(s), 0o755)
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// takeAzNotExecuted returns and clears the commands the wrapper listed.
func takeAzNotExecuted(dir string) []HostCommand {
	path := filepath.Join(dir, azNotExecuted)
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer os.Remove(path)
	defer f.Close()
	var out []HostCommand
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, HostCommand{Node: "workstation", Line: "az aks nodepool upgrade", Checks: []string{sc.Text()}})
	}
	return out
}

// azWrapperNote is the lane's log line for the wrapper.
func azWrapperNote(installed string) string {
	return fmt.Sprintf("azure-cli %s < %s: az aks nodepool upgrade is checked and listed as not executed (Azure/azure-cli#25530)", installed, azFixedIn)
}
