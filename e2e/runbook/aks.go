package runbooke2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// Azure Resource Manager for AKS, in the shapes of the ManagedCluster,
// AgentPool and ManagedClusterUpgradeProfile models of
// azure-mgmt-containerservice (API version 2022-11-01, the one azure-cli
// 2.45.0 uses: azure/cli/core/profiles/_shared.py, MGMT_CONTAINERSERVICE),
// plus what az login needs: an ADFS-style token endpoint (the
// authority az cloud register names for Azure Stack Hub, which MSAL
// discovers at <authority>/.well-known/openid-configuration without
// asking login.microsoftonline.com) and the subscription list.

// AKSTenant and the service principal az logs in with.
const (
	AKSTenant       = "adfs"
	AKSClientID     = "8d1c7e2a-0000-4000-8000-00000000a11c"
	AKSClientSecret = "local-endpoint-secret"
	aksToken        = "local-aks-access-token"
)

// AKS serves ARM's managedClusters and agentPools for one World, and the
// token endpoint.
type AKS struct {
	W   *World
	Rec *Recorder
	// Base is the server's own URL (https://127.0.0.1:PORT), for the
	// links it answers with.
	Base string
}

type armError struct {
	status  int
	code    string
	message string
}

var aksRoutes = []struct {
	method string
	re     *regexp.Regexp
	op     string
}{
	{"GET", regexp.MustCompile(`^/subscriptions/([^/]+)/resource[gG]roups/([^/]+)/providers/Microsoft\.ContainerService/managedClusters/([^/]+)$`), "ManagedClusters_Get"},
	{"PUT", regexp.MustCompile(`^/subscriptions/([^/]+)/resource[gG]roups/([^/]+)/providers/Microsoft\.ContainerService/managedClusters/([^/]+)$`), "ManagedClusters_CreateOrUpdate"},
	{"GET", regexp.MustCompile(`^/subscriptions/([^/]+)/resource[gG]roups/([^/]+)/providers/Microsoft\.ContainerService/managedClusters/([^/]+)/upgradeProfiles/default$`), "ManagedClusters_GetUpgradeProfile"},
	{"GET", regexp.MustCompile(`^/subscriptions/([^/]+)/resource[gG]roups/([^/]+)/providers/Microsoft\.ContainerService/managedClusters/([^/]+)/agentPools$`), "AgentPools_List"},
	{"GET", regexp.MustCompile(`^/subscriptions/([^/]+)/resource[gG]roups/([^/]+)/providers/Microsoft\.ContainerService/managedClusters/([^/]+)/agentPools/([^/]+)$`), "AgentPools_Get"},
	{"PUT", regexp.MustCompile(`^/subscriptions/([^/]+)/resource[gG]roups/([^/]+)/providers/Microsoft\.ContainerService/managedClusters/([^/]+)/agentPools/([^/]+)$`), "AgentPools_CreateOrUpdate"},
	{"GET", regexp.MustCompile(`^/subscriptions/([^/]+)/resource[gG]roups/([^/]+)/providers/Microsoft\.ContainerService/managedClusters/([^/]+)/agentPools/([^/]+)/upgradeProfiles/default$`), "AgentPools_GetUpgradeProfile"},
	{"GET", regexp.MustCompile(`^/subscriptions/([^/]+)/providers/Microsoft\.ContainerService/locations/([^/]+)/operations/([^/]+)$`), "Operations_Get"},
	{"GET", regexp.MustCompile(`^/subscriptions$`), "Subscriptions_List"},
	{"GET", regexp.MustCompile(`^/tenants$`), "Tenants_List"},
	{"GET", regexp.MustCompile(`^(/adfs)+/\.well-known/openid-configuration$`), "openid-configuration"},
	{"POST", regexp.MustCompile(`^(/adfs)+/oauth2/token$`), "token"},
}

func (a *AKS) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	call := Call{Service: "aks", Method: r.Method, Path: r.URL.Path, Body: compactJSON(body)}
	var out any
	var aerr *armError
	header := rw.Header()
	defer func() {
		header.Set("Content-Type", "application/json; charset=utf-8")
		if aerr != nil {
			call.Status, call.Error = aerr.status, aerr.code+": "+aerr.message
			rw.WriteHeader(aerr.status)
			_ = json.NewEncoder(rw).Encode(map[string]any{"error": map[string]any{"code": aerr.code, "message": aerr.message}})
		} else {
			if call.Status == 0 {
				call.Status = http.StatusOK
			}
			rw.WriteHeader(call.Status)
			_ = json.NewEncoder(rw).Encode(out)
		}
		if call.Op != "openid-configuration" && call.Op != "token" {
			a.Rec.Add(call)
		}
	}()
	var args []string
	for _, rt := range aksRoutes {
		if rt.method != r.Method {
			continue
		}
		if m := rt.re.FindStringSubmatch(r.URL.Path); m != nil {
			call.Op, args = rt.op, m[1:]
			break
		}
	}
	switch call.Op {
	case "":
		call.Op = "unknown"
		aerr = &armError{http.StatusNotFound, "NotFound", "the recording endpoint does not serve " + r.Method + " " + r.URL.Path}
		return
	case "openid-configuration":
		out = map[string]any{"issuer": a.Base + "/adfs", "authorization_endpoint": a.Base + "/adfs/oauth2/authorize",
			"token_endpoint": a.Base + "/adfs/oauth2/token", "response_types_supported": []string{"code", "id_token", "token"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_post"}}
		return
	case "token":
		form, _ := url.ParseQuery(string(body))
		if form.Get("client_id") != AKSClientID || form.Get("client_secret") != AKSClientSecret {
			aerr = &armError{http.StatusUnauthorized, "invalid_client", "MSIS9607: The 'client_id' parameter in the request is invalid."}
			return
		}
		out = map[string]any{"token_type": "Bearer", "expires_in": 3600, "ext_expires_in": 3600, "access_token": aksToken}
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+aksToken {
		aerr = &armError{http.StatusUnauthorized, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing."}
		return
	}
	a.W.Lock()
	defer a.W.Unlock()
	w := a.W
	switch call.Op {
	case "Subscriptions_List":
		out = map[string]any{"value": []any{map[string]any{"id": "/subscriptions/" + w.Subscription, "subscriptionId": w.Subscription,
			"tenantId": AKSTenant, "displayName": "gpufleet-runbook", "state": "Enabled", "authorizationSource": "RoleBased",
			"subscriptionPolicies": map[string]any{"locationPlacementId": "Public_2014-09-01", "quotaId": "PayAsYouGo_2014-09-01", "spendingLimit": "Off"}}}}
		return
	case "Tenants_List":
		out = map[string]any{"value": []any{map[string]any{"id": "/tenants/" + AKSTenant, "tenantId": AKSTenant}}}
		return
	case "Operations_Get":
		out = map[string]any{"name": args[2], "status": "Succeeded", "startTime": "2026-12-01T08:00:00Z", "endTime": "2026-12-01T08:00:01Z"}
		return
	}
	if args[0] != w.Subscription {
		aerr = &armError{http.StatusNotFound, "SubscriptionNotFound", fmt.Sprintf("The subscription '%s' could not be found.", args[0])}
		return
	}
	if !strings.EqualFold(args[1], w.ResourceGroup) {
		aerr = &armError{http.StatusNotFound, "ResourceGroupNotFound", fmt.Sprintf("Resource group '%s' could not be found.", args[1])}
		return
	}
	if args[2] != w.Cluster {
		aerr = &armError{http.StatusNotFound, "ResourceNotFound", fmt.Sprintf("The Resource 'Microsoft.ContainerService/managedClusters/%s' under resource group '%s' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix", args[2], args[1])}
		return
	}
	call.Target = w.Cluster
	var in map[string]any
	if len(body) > 0 && json.Unmarshal(body, &in) != nil {
		aerr = &armError{http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid and could not be deserialized."}
		return
	}
	if len(args) > 3 {
		call.Target += "/" + args[3]
	}
	out, aerr = a.op(call.Op, args, in, &call, header)
}

func (a *AKS) op(op string, args []string, in map[string]any, call *Call, header http.Header) (any, *armError) {
	w := a.W
	switch op {
	case "ManagedClusters_Get":
		return a.managedCluster("Succeeded"), nil
	case "ManagedClusters_GetUpgradeProfile":
		return a.upgradeProfile(), nil
	case "AgentPools_List":
		var l []any
		for _, p := range w.Pools {
			l = append(l, a.agentPool(p, "Succeeded"))
		}
		return map[string]any{"value": l}, nil
	case "AgentPools_Get":
		p := w.Pool(args[3])
		if p == nil {
			return nil, a.noPool(args[3])
		}
		return a.agentPool(p, "Succeeded"), nil
	case "AgentPools_GetUpgradeProfile":
		p := w.Pool(args[3])
		if p == nil {
			return nil, a.noPool(args[3])
		}
		return map[string]any{"id": a.clusterID() + "/agentPools/" + p.Name + "/upgradeProfiles/default", "name": "default",
			"properties": map[string]any{"kubernetesVersion": p.Version, "osType": "Linux", "upgrades": a.upgrades(p.Version, w.ControlPlane)}}, nil
	case "ManagedClusters_CreateOrUpdate":
		call.Mutating = true
		props, _ := in["properties"].(map[string]any)
		call.Version = str(props, "kubernetesVersion")
		if err := a.putCluster(props); err != nil {
			return nil, err
		}
		a.async(header)
		call.Status = http.StatusOK
		return a.managedCluster("Updating"), nil
	case "AgentPools_CreateOrUpdate":
		call.Mutating = true
		props, _ := in["properties"].(map[string]any)
		call.Version = str(props, "orchestratorVersion")
		p := w.Pool(args[3])
		if p == nil {
			return nil, &armError{http.StatusBadRequest, "InvalidParameter", "the recording endpoint creates no agent pool: " + args[3]}
		}
		if err := a.putPool(p, call.Version); err != nil {
			return nil, err
		}
		a.async(header)
		return a.agentPool(p, "Upgrading"), nil
	}
	return nil, &armError{http.StatusNotFound, "NotFound", op}
}

// async marks a long-running answer: its status is polled at the
// Azure-AsyncOperation URL, which reads Succeeded at once.
func (a *AKS) async(h http.Header) {
	a.W.Operations++
	id := fmt.Sprintf("9f3e2d1c-0000-4000-8000-%012d", a.W.Operations)
	h.Set("Azure-AsyncOperation", fmt.Sprintf("%s/subscriptions/%s/providers/Microsoft.ContainerService/locations/%s/operations/%s?api-version=2017-08-31", a.Base, a.W.Subscription, a.W.Region, id))
	h.Set("Retry-After", "0")
}

func (a *AKS) noPool(name string) *armError {
	return &armError{http.StatusNotFound, "NotFound", fmt.Sprintf("Agent Pool '%s' not found.", name)}
}

func (a *AKS) clusterID() string {
	w := a.W
	return fmt.Sprintf("/subscriptions/%s/resourcegroups/%s/providers/Microsoft.ContainerService/managedClusters/%s", w.Subscription, w.ResourceGroup, w.Cluster)
}

func (a *AKS) poolProps(p *Pool, state string) map[string]any {
	vm := "Standard_D16s_v5"
	mode := "User"
	if p.GPUs > 0 {
		vm = "Standard_ND96isr_H100_v5"
	}
	if p.Name == "systemnp" {
		mode = "System"
	}
	return map[string]any{
		"count": len(p.Nodes), "vmSize": vm, "osDiskSizeGB": 128, "osDiskType": "Managed", "kubeletDiskType": "OS",
		"maxPods": 110, "type": "VirtualMachineScaleSets", "mode": mode, "osType": "Linux", "osSKU": "Ubuntu",
		"orchestratorVersion": p.Version, "currentOrchestratorVersion": p.Version, "provisioningState": state,
		"powerState": map[string]any{"code": "Running"}, "enableAutoScaling": false, "enableNodePublicIP": false,
		"nodeImageVersion": "AKSUbuntu-2204gen2containerd-202611.20.0", "upgradeSettings": map[string]any{"maxSurge": "10%"},
	}
}

func (a *AKS) agentPool(p *Pool, state string) map[string]any {
	return map[string]any{"id": a.clusterID() + "/agentPools/" + p.Name, "name": p.Name,
		"type": "Microsoft.ContainerService/managedClusters/agentPools", "properties": a.poolProps(p, state)}
}

func (a *AKS) managedCluster(state string) map[string]any {
	w := a.W
	var profiles []any
	for _, p := range w.Pools {
		pp := a.poolProps(p, state)
		pp["name"] = p.Name
		profiles = append(profiles, pp)
	}
	return map[string]any{
		"id": a.clusterID(), "location": w.Region, "name": w.Cluster, "type": "Microsoft.ContainerService/ManagedClusters",
		"sku":      map[string]any{"name": "Base", "tier": "Standard"},
		"identity": map[string]any{"type": "SystemAssigned", "principalId": "00000000-0000-4000-8000-0000000000a1", "tenantId": AKSTenant},
		"properties": map[string]any{
			"provisioningState": state, "powerState": map[string]any{"code": "Running"}, "maxAgentPools": 100,
			"kubernetesVersion": w.ControlPlane, "currentKubernetesVersion": w.ControlPlane,
			"dnsPrefix": w.Cluster, "fqdn": w.Cluster + "-dns-0a1b2c3d.hcp." + w.Region + ".azmk8s.io",
			"agentPoolProfiles": profiles, "servicePrincipalProfile": map[string]any{"clientId": "msi"},
			"nodeResourceGroup": fmt.Sprintf("MC_%s_%s_%s", w.ResourceGroup, w.Cluster, w.Region), "enableRBAC": true,
			"supportPlan":    "KubernetesOfficial",
			"networkProfile": map[string]any{"networkPlugin": "azure", "loadBalancerSku": "standard", "outboundType": "loadBalancer"},
		},
	}
}

// upgrades are the versions a component at cur may move to: the newer
// patches of its minor and of the next, not past limit.
func (a *AKS) upgrades(cur, limit string) []any {
	var vs []string
	for m := range patches {
		if n := minorNum(m); n >= minorNum(cur) && n <= minorNum(cur)+1 && n <= minorNum(limit)+1 && Patch(m) != cur {
			vs = append(vs, Patch(m))
		}
	}
	sort.Strings(vs)
	var out []any
	for _, v := range vs {
		out = append(out, map[string]any{"kubernetesVersion": v, "isPreview": false})
	}
	return out
}

func (a *AKS) upgradeProfile() map[string]any {
	w := a.W
	var pools []any
	for _, p := range w.Pools {
		pools = append(pools, map[string]any{"name": p.Name, "kubernetesVersion": p.Version, "osType": "Linux", "upgrades": a.upgrades(p.Version, w.ControlPlane)})
	}
	return map[string]any{"id": a.clusterID() + "/upgradeprofiles/default", "name": "default",
		"type": "Microsoft.ContainerService/managedClusters/upgradeprofiles",
		"properties": map[string]any{
			"controlPlaneProfile": map[string]any{"kubernetesVersion": w.ControlPlane, "osType": "Linux", "upgrades": a.upgrades(w.ControlPlane, nextMinor(Minor(w.ControlPlane)))},
			"agentPoolProfiles":   pools,
		}}
}

// resolve reads an AKS version: MAJOR.MINOR is the newest patch of the
// minor; a full version must be one the catalog has.
func resolveAKS(v string) (string, bool) {
	if regexp.MustCompile(`^1\.\d+$`).MatchString(v) {
		_, ok := patches[v]
		return Patch(v), ok
	}
	return v, regexp.MustCompile(`^1\.\d+\.\d+$`).MatchString(v) && Patch(Minor(v)) == v
}

// aksSkewLimit is how many minors a node pool may lag the control plane:
// AKS follows the upstream kubelet skew ("please check
// https://aka.ms/version-skew-policy" in its own error), three minors
// since Kubernetes 1.28 (https://kubernetes.io/releases/version-skew-policy/#kubelet).
const aksSkewLimit = 3

// putCluster enforces AKS's rules on a control-plane upgrade: one minor
// at a time ("Upgrading Kubernetes version 1.28.12 to 1.30.2 is not
// allowed. Available upgrades: [1.29.7 ...]. Please see
// https://aka.ms/aks-supported-k8s-ver for version details.",
// OperationNotAllowed, rancher/dashboard#11884) and no node pool left
// beyond the skew limit ("Node pool version 1.20.9 and control plane
// version 1.23.12 are incompatible. Minor version of node pool cannot be
// more than 2 versions less than control plane's version. Minor version of
// node pool is 20 and control plane is 23.", NodePoolMcVersionIncompatible,
// MicrosoftDocs/azure-dev-docs#1034). The agent pool profiles it sends
// move their pools too (az aks upgrade without --control-plane-only).
func (a *AKS) putCluster(props map[string]any) *armError {
	w := a.W
	req := str(props, "kubernetesVersion")
	v, ok := resolveAKS(req)
	if !ok {
		return &armError{http.StatusBadRequest, "InvalidParameter", fmt.Sprintf("The value of parameter kubernetesVersion %s is invalid. Please see https://aka.ms/aks-supported-k8s-ver for version details.", req)}
	}
	if d := minorNum(v) - minorNum(w.ControlPlane); d > 1 || d < 0 {
		var avail []string
		for _, u := range a.upgrades(w.ControlPlane, nextMinor(Minor(w.ControlPlane))) {
			avail = append(avail, u.(map[string]any)["kubernetesVersion"].(string))
		}
		return &armError{http.StatusBadRequest, "OperationNotAllowed", fmt.Sprintf("Upgrading Kubernetes version %s to %s is not allowed. Available upgrades: [%s]. Please see https://aka.ms/aks-supported-k8s-ver for version details.", w.ControlPlane, v, strings.Join(avail, " "))}
	}
	profiles, _ := props["agentPoolProfiles"].([]any)
	next := map[string]string{}
	for _, pr := range profiles {
		m, _ := pr.(map[string]any)
		if pv := str(m, "orchestratorVersion"); pv != "" {
			next[str(m, "name")] = pv
		}
	}
	for _, p := range w.Pools {
		pv := p.Version
		if n, ok := next[p.Name]; ok {
			if full, ok := resolveAKS(n); ok {
				pv = full
			}
		}
		if minorNum(v)-minorNum(pv) > aksSkewLimit {
			return &armError{http.StatusBadRequest, "NodePoolMcVersionIncompatible", fmt.Sprintf("Node pool version %s and control plane version %s are incompatible. Minor version of node pool cannot be more than %d versions less than control plane's version. Minor version of node pool is %d and control plane is %d.", pv, v, aksSkewLimit, minorNum(pv), minorNum(v))}
		}
		if minorNum(pv) > minorNum(v) {
			return a.newerPool(pv, v)
		}
	}
	w.ControlPlane = v
	for _, p := range w.Pools {
		if n, ok := next[p.Name]; ok {
			if full, ok := resolveAKS(n); ok && full != p.Version {
				a.movePool(p, full)
			}
		}
	}
	return nil
}

// newerPool is AKS's refusal of a node pool newer than the control plane:
// "Node pool version 1.20.5 and control plane version 1.19.9 are
// incompatible. Minor version of node pool version 20 is bigger than
// control plane version 19. For more information, please check
// https://aka.ms/version-skew-policy" (NodePoolMcVersionIncompatible,
// rancher/rancher#33426).
func (a *AKS) newerPool(pool, cp string) *armError {
	return &armError{http.StatusBadRequest, "NodePoolMcVersionIncompatible", fmt.Sprintf("Node pool version %s and control plane version %s are incompatible. Minor version of node pool version %d is bigger than control plane version %d. For more information, please check https://aka.ms/version-skew-policy", pool, cp, minorNum(pool), minorNum(cp))}
}

func (a *AKS) putPool(p *Pool, req string) *armError {
	v, ok := resolveAKS(req)
	if !ok {
		return &armError{http.StatusBadRequest, "InvalidParameter", fmt.Sprintf("The value of parameter orchestratorVersion %s is invalid. Please see https://aka.ms/aks-supported-k8s-ver for version details.", req)}
	}
	if minorNum(v) > minorNum(a.W.ControlPlane) {
		return a.newerPool(v, a.W.ControlPlane)
	}
	a.movePool(p, v)
	return nil
}

func (a *AKS) movePool(p *Pool, v string) {
	p.Version = v
	for _, n := range p.Nodes {
		n.Kubelet = v
	}
}
