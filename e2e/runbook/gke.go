package runbooke2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
)

// The Kubernetes Engine API v1 (container.googleapis.com/v1), in the
// shapes of the discovery document and messages gcloud bundles
// (googlecloudsdk/generated_clients/apis/container/v1/container_v1_messages.py:
// Cluster, NodePool, ServerConfig, Operation, ClusterUpdate,
// MaintenancePolicy, TimeWindow, MaintenanceExclusionOptions), and as
// gcloud 528 calls it (googlecloudsdk/api_lib/container/api_adapter.py):
// clusters upgrade reads the cluster and serverConfig, then PUTs the
// cluster with a ClusterUpdate (desiredMasterVersion, or desiredNodeVersion
// and desiredNodePoolId) and polls the operation; the maintenance
// exclusion flags of clusters update read the cluster and send
// setMaintenancePolicy.

// GKE serves the container API for one World.
type GKE struct {
	W   *World
	Rec *Recorder
}

type gkeError struct {
	status  int
	reason  string // INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION
	message string
}

var gkeRoutes = []struct {
	method string
	re     *regexp.Regexp
	op     string
}{
	{"GET", regexp.MustCompile(`^/v1/projects/([^/]+)/locations/([^/]+)/clusters/([^/:]+)$`), "projects.locations.clusters.get"},
	{"PUT", regexp.MustCompile(`^/v1/projects/([^/]+)/locations/([^/]+)/clusters/([^/:]+)$`), "projects.locations.clusters.update"},
	{"POST", regexp.MustCompile(`^/v1/projects/([^/]+)/locations/([^/]+)/clusters/([^/:]+):setMaintenancePolicy$`), "projects.locations.clusters.setMaintenancePolicy"},
	{"GET", regexp.MustCompile(`^/v1/projects/([^/]+)/locations/([^/]+)/clusters/([^/:]+)/nodePools/([^/:]+)$`), "projects.locations.clusters.nodePools.get"},
	{"POST", regexp.MustCompile(`^/v1/projects/([^/]+)/locations/([^/]+)/clusters/([^/:]+)/nodePools/([^/:]+):completeUpgrade$`), "projects.locations.clusters.nodePools.completeUpgrade"},
	{"GET", regexp.MustCompile(`^/v1/projects/([^/]+)/locations/([^/]+)/serverConfig$`), "projects.locations.getServerConfig"},
	{"GET", regexp.MustCompile(`^/v1/projects/([^/]+)/locations/([^/]+)/operations/([^/:]+)$`), "projects.locations.operations.get"},
}

func (g *GKE) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	call := Call{Service: "gke", Method: r.Method, Path: r.URL.Path, Body: compactJSON(body)}
	var out any
	var gerr *gkeError
	defer func() {
		rw.Header().Set("Content-Type", "application/json; charset=UTF-8")
		if gerr != nil {
			call.Status, call.Error = gerr.status, gerr.reason+": "+gerr.message
			rw.WriteHeader(gerr.status)
			_ = json.NewEncoder(rw).Encode(map[string]any{"error": map[string]any{"code": gerr.status, "message": gerr.message, "status": gerr.reason}})
		} else {
			call.Status = http.StatusOK
			_ = json.NewEncoder(rw).Encode(out)
		}
		g.Rec.Add(call)
	}()
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		gerr = &gkeError{http.StatusUnauthorized, "UNAUTHENTICATED", "Request is missing required authentication credential."}
		return
	}
	var args []string
	for _, rt := range gkeRoutes {
		if rt.method != r.Method {
			continue
		}
		if m := rt.re.FindStringSubmatch(r.URL.Path); m != nil {
			call.Op, args = rt.op, m[1:]
			break
		}
	}
	if call.Op == "" {
		call.Op = "unknown"
		gerr = &gkeError{http.StatusNotFound, "NOT_FOUND", "the recording endpoint does not serve " + r.Method + " " + r.URL.Path}
		return
	}
	var in map[string]any
	if len(body) > 0 && json.Unmarshal(body, &in) != nil {
		gerr = &gkeError{http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received."}
		return
	}
	g.W.Lock()
	defer g.W.Unlock()
	w := g.W
	if args[0] != w.Project {
		gerr = &gkeError{http.StatusForbidden, "PERMISSION_DENIED", fmt.Sprintf("Permission denied on resource project %s.", args[0])}
		return
	}
	// A regional cluster is found at its region only (a zone or another
	// region is another location).
	if args[1] != w.Location && call.Op != "projects.locations.getServerConfig" {
		gerr = &gkeError{http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("Not found: projects/%s/locations/%s/clusters/%s.", args[0], args[1], args[2])}
		return
	}
	if len(args) > 2 && call.Op != "projects.locations.operations.get" && args[2] != w.Cluster {
		gerr = &gkeError{http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("Not found: projects/%s/locations/%s/clusters/%s.", args[0], args[1], args[2])}
		return
	}
	call.Target = w.Cluster
	out, gerr = g.op(call.Op, args, in, &call)
}

func (g *GKE) op(op string, args []string, in map[string]any, call *Call) (any, *gkeError) {
	w := g.W
	switch op {
	case "projects.locations.clusters.get":
		return g.cluster(), nil
	case "projects.locations.getServerConfig":
		return g.serverConfig(), nil
	case "projects.locations.clusters.nodePools.get":
		call.Target += "/" + args[3]
		p := w.Pool(args[3])
		if p == nil {
			return nil, &gkeError{http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("Not found: projects/%s/locations/%s/clusters/%s/nodePools/%s.", args[0], args[1], args[2], args[3])}
		}
		return g.nodePool(p), nil
	case "projects.locations.operations.get":
		// Operations finish at once: the first poll reads DONE.
		return map[string]any{"name": args[2], "status": "DONE", "selfLink": g.link("operations/" + args[2])}, nil
	case "projects.locations.clusters.update":
		call.Mutating = true
		u, _ := in["update"].(map[string]any)
		if v := str(u, "desiredMasterVersion"); v != "" {
			call.Version = v
			return g.upgradeMaster(v)
		}
		if v := str(u, "desiredNodeVersion"); v != "" {
			pool := str(u, "desiredNodePoolId")
			call.Version = v
			call.Target += "/" + pool
			return g.upgradeNodes(pool, v)
		}
		return nil, &gkeError{http.StatusBadRequest, "INVALID_ARGUMENT", "the recording endpoint serves version updates only: " + call.Body}
	case "projects.locations.clusters.setMaintenancePolicy":
		call.Mutating = true
		return g.setMaintenancePolicy(in)
	case "projects.locations.clusters.nodePools.completeUpgrade":
		call.Mutating = true
		call.Target += "/" + args[3]
		// completeUpgrade applies to a blue-green upgrade waiting in its
		// soak; these pools use surge upgrades.
		return nil, &gkeError{http.StatusBadRequest, "FAILED_PRECONDITION", "Node pool " + args[3] + " is not in a blue-green upgrade."}
	}
	return nil, &gkeError{http.StatusNotFound, "NOT_FOUND", op}
}

func (g *GKE) link(rest string) string {
	return fmt.Sprintf("https://container.googleapis.com/v1/projects/%s/locations/%s/%s", g.W.Project, g.W.Location, rest)
}

func (g *GKE) cluster() map[string]any {
	w := g.W
	var pools []any
	for _, p := range w.Pools {
		pools = append(pools, g.nodePool(p))
	}
	excl := map[string]any{}
	for name, e := range w.Exclusions {
		excl[name] = map[string]any{"startTime": e.Start, "endTime": e.End, "maintenanceExclusionOptions": map[string]any{"scope": e.Scope}}
	}
	oldest := w.ControlPlane
	for _, p := range w.Pools {
		if minorNum(p.Version) < minorNum(oldest) {
			oldest = p.Version
		}
	}
	return map[string]any{
		"name": w.Cluster, "location": w.Location, "zone": w.Location, "status": "RUNNING",
		"currentMasterVersion": gkeVersion(w.ControlPlane), "currentNodeVersion": gkeVersion(oldest),
		"initialClusterVersion": gkeVersion(Patch("1.33")), "endpoint": "34.118.0.10",
		"selfLink": g.link("clusters/" + w.Cluster), "nodePools": pools,
		"releaseChannel": map[string]any{"channel": "REGULAR"},
		"maintenancePolicy": map[string]any{
			"window":          map[string]any{"maintenanceExclusions": excl},
			"resourceVersion": fmt.Sprintf("e3b0c44%d", len(w.Exclusions)+w.Operations),
		},
		"locations": []string{w.Location + "-a", w.Location + "-b", w.Location + "-c"},
	}
}

func (g *GKE) nodePool(p *Pool) map[string]any {
	machine := "n2-standard-32"
	if p.GPUs > 0 {
		machine = "a3-highgpu-8g"
	}
	return map[string]any{
		"name": p.Name, "version": gkeVersion(p.Version), "status": "RUNNING", "initialNodeCount": len(p.Nodes),
		"config":          map[string]any{"machineType": machine, "imageType": "COS_CONTAINERD"},
		"management":      map[string]any{"autoUpgrade": true, "autoRepair": true},
		"upgradeSettings": map[string]any{"maxSurge": 1, "maxUnavailable": 0, "strategy": "SURGE"},
		"selfLink":        g.link("clusters/" + g.W.Cluster + "/nodePools/" + p.Name),
	}
}

// validVersions are the versions serverConfig offers: the catalog's
// patches from the control plane's minor to the target.
func (g *GKE) validVersions() []string {
	var out []string
	for m := range patches {
		if minorNum(m) >= minorNum(g.W.ControlPlane)-3 {
			out = append(out, gkeVersion(Patch(m)))
		}
	}
	sort.Slice(out, func(i, j int) bool { return minorNum(out[i]) > minorNum(out[j]) })
	return out
}

func (g *GKE) serverConfig() map[string]any {
	vs := g.validVersions()
	return map[string]any{
		"defaultClusterVersion": gkeVersion(g.W.ControlPlane), "validMasterVersions": vs, "validNodeVersions": vs,
		"defaultImageType": "COS_CONTAINERD", "validImageTypes": []string{"COS_CONTAINERD", "UBUNTU_CONTAINERD"},
		"channels": []any{map[string]any{"channel": "REGULAR", "defaultVersion": gkeVersion(g.W.ControlPlane), "validVersions": vs}},
	}
}

// resolve reads a requested version: "-" is the default, "1.38" the
// newest patch of that minor, a full version must be offered.
func (g *GKE) resolve(v string) (string, bool) {
	if v == "-" {
		return g.W.ControlPlane, true
	}
	v = strings.TrimPrefix(v, "v")
	for _, valid := range g.validVersions() {
		full := strings.TrimSuffix(valid, "-gke.1200")
		if v == valid || v == full || v == Minor(full) {
			return full, true
		}
	}
	return "", false
}

func (g *GKE) operation(typ, target string) map[string]any {
	g.W.Operations++
	name := fmt.Sprintf("operation-1764576000000-%08x", g.W.Operations)
	return map[string]any{"name": name, "operationType": typ, "status": "RUNNING", "zone": g.W.Location,
		"selfLink": g.link("operations/" + name), "targetLink": g.link(target)}
}

// upgradeMaster enforces GKE's rule that the control plane moves one minor
// at a time: "Master version 1.14.10-gke.36 cannot be upgraded to
// releaseChannel REGULAR default version 1.16.9-gke.6: cannot upgrade the
// master more than a minor version at a time." (INVALID_ARGUMENT,
// kubeflow/code-intelligence#153), and an unknown version: `Master version
// "1.14.3-gke.9" is unsupported.` (stefanprodan/istio-gke#11).
func (g *GKE) upgradeMaster(req string) (any, *gkeError) {
	w := g.W
	v, ok := g.resolve(req)
	if !ok {
		return nil, &gkeError{http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Master version %q is unsupported.", req)}
	}
	if d := minorNum(v) - minorNum(w.ControlPlane); d > 1 || d < 0 {
		return nil, &gkeError{http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Master version %s cannot be upgraded to %s: cannot upgrade the master more than a minor version at a time.", gkeVersion(w.ControlPlane), gkeVersion(v))}
	}
	w.ControlPlane = v
	return g.operation("UPGRADE_MASTER", "clusters/"+w.Cluster), nil
}

// upgradeNodes enforces that a node pool is not newer than the control
// plane: `Node version "1.16.8-gke.9" must not have a greater minor version
// than master version "1.15.11-gke.12".` (badRequest,
// hashicorp/terraform-provider-google#6405).
func (g *GKE) upgradeNodes(pool, req string) (any, *gkeError) {
	w := g.W
	p := w.Pool(pool)
	if p == nil {
		return nil, &gkeError{http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("Not found: projects/%s/locations/%s/clusters/%s/nodePools/%s.", w.Project, w.Location, w.Cluster, pool)}
	}
	v, ok := g.resolve(req)
	if !ok {
		return nil, &gkeError{http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Node version %q is unsupported.", req)}
	}
	if minorNum(v) > minorNum(w.ControlPlane) {
		return nil, &gkeError{http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Node version %q must not have a greater minor version than master version %q.", gkeVersion(v), gkeVersion(w.ControlPlane))}
	}
	p.Version = v
	for _, n := range p.Nodes {
		n.Kubelet = v
	}
	return g.operation("UPGRADE_NODES", "clusters/"+w.Cluster+"/nodePools/"+pool), nil
}

// setMaintenancePolicy replaces the maintenance exclusions; a scope must
// be one of MaintenanceExclusionOptions.Scope's values.
func (g *GKE) setMaintenancePolicy(in map[string]any) (any, *gkeError) {
	w := g.W
	mp, _ := in["maintenancePolicy"].(map[string]any)
	win, _ := mp["window"].(map[string]any)
	ex, _ := win["maintenanceExclusions"].(map[string]any)
	got := map[string]Exclusion{}
	for name, v := range ex {
		tw, _ := v.(map[string]any)
		opts, _ := tw["maintenanceExclusionOptions"].(map[string]any)
		e := Exclusion{Start: str(tw, "startTime"), End: str(tw, "endTime"), Scope: str(opts, "scope")}
		switch e.Scope {
		case "", "NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES":
		default:
			return nil, &gkeError{http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid value at 'maintenance_policy.window.maintenance_exclusions[0].value.maintenance_exclusion_options.scope' (TYPE_ENUM), \"" + e.Scope + "\""}
		}
		if e.End == "" {
			return nil, &gkeError{http.StatusBadRequest, "INVALID_ARGUMENT", "Maintenance exclusion " + name + " has no end time."}
		}
		got[name] = e
	}
	w.Exclusions = got
	return g.operation("UPDATE_CLUSTER", "clusters/"+w.Cluster), nil
}
