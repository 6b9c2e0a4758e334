package runbooke2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The EKS API (rest-json, version 2017-11-01) as botocore's bundled model
// describes it (botocore/data/eks/2017-11-01/service-2.json: the
// operations' requestUri and the shapes Cluster, Update, Nodegroup, Addon,
// AddonInfo, InsightSummary). The endpoint answers the operations the
// runbook uses, keeps the World's state, and refuses what EKS refuses with
// EKS's own error codes and texts, each cited where it is raised.

// eksAddonVersion is the version of an add-on for a Kubernetes minor in
// this lane's catalog: the VPC CNI moves one minor per Kubernetes minor
// (so that the one-minor-at-a-time rule holds hop by hop), kube-proxy
// follows the Kubernetes patch, CoreDNS moves every other minor. Fixture
// data, not EKS's table.
func eksAddonVersion(addon, minor string) string {
	n := minorNum(minor)
	switch addon {
	case "vpc-cni":
		return fmt.Sprintf("v1.%d.0-eksbuild.1", n-16)
	case "kube-proxy":
		return "v" + Patch(minor) + "-eksbuild.1"
	case "coredns":
		return fmt.Sprintf("v1.%d.1-eksbuild.1", 12+(n-35)/2)
	}
	return ""
}

// eksCompatible lists the versions of an add-on that work on a
// Kubernetes minor, newest first: the VPC CNI of that minor and the two
// before, kube-proxy and CoreDNS of that minor only.
func eksCompatible(addon, minor string) []string {
	if addon == "vpc-cni" {
		var out []string
		for i := 0; i < 3; i++ {
			out = append(out, eksAddonVersion(addon, fmt.Sprintf("1.%d", minorNum(minor)-i)))
		}
		return out
	}
	return []string{eksAddonVersion(addon, minor)}
}

// addonMinor is the minor of an add-on version ("v1.21.0-eksbuild.1" -> 21).
func addonMinor(v string) int {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return -1
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil {
		return -1
	}
	return n
}

// EKS serves the EKS API for one World.
type EKS struct {
	W   *World
	Rec *Recorder
	// OnChange runs after an update finishes, to mirror the world.
	OnChange func()
}

type eksError struct {
	status  int
	code    string
	message string
}

var eksRoutes = []struct {
	method string
	re     *regexp.Regexp
	op     string
}{
	{"GET", regexp.MustCompile(`^/clusters/([^/]+)$`), "DescribeCluster"},
	{"POST", regexp.MustCompile(`^/clusters/([^/]+)/updates$`), "UpdateClusterVersion"},
	{"GET", regexp.MustCompile(`^/clusters/([^/]+)/updates/([^/]+)$`), "DescribeUpdate"},
	{"POST", regexp.MustCompile(`^/clusters/([^/]+)/insights$`), "ListInsights"},
	{"GET", regexp.MustCompile(`^/clusters/([^/]+)/addons$`), "ListAddons"},
	{"GET", regexp.MustCompile(`^/clusters/([^/]+)/addons/([^/]+)$`), "DescribeAddon"},
	{"POST", regexp.MustCompile(`^/clusters/([^/]+)/addons/([^/]+)/update$`), "UpdateAddon"},
	{"GET", regexp.MustCompile(`^/addons/supported-versions$`), "DescribeAddonVersions"},
	{"GET", regexp.MustCompile(`^/clusters/([^/]+)/node-groups$`), "ListNodegroups"},
	{"GET", regexp.MustCompile(`^/clusters/([^/]+)/node-groups/([^/]+)$`), "DescribeNodegroup"},
	{"POST", regexp.MustCompile(`^/clusters/([^/]+)/node-groups/([^/]+)/update-version$`), "UpdateNodegroupVersion"},
	{"GET", regexp.MustCompile(`^/clusters/([^/]+)/pod-identity-associations$`), "ListPodIdentityAssociations"},
	{"GET", regexp.MustCompile(`^/clusters/([^/]+)/pod-identity-associations/([^/]+)$`), "DescribePodIdentityAssociation"},
}

// signedRegion reads the region from a SigV4 Authorization header's
// credential scope (Credential=AKID/DATE/REGION/SERVICE/aws4_request).
func signedRegion(auth string) string {
	i := strings.Index(auth, "Credential=")
	if i < 0 {
		return ""
	}
	scope := strings.Split(strings.SplitN(auth[i+len("Credential="):], ",", 2)[0], "/")
	if len(scope) < 3 {
		return ""
	}
	return scope[2]
}

func (e *EKS) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	call := Call{Service: "eks", Method: r.Method, Path: r.URL.RequestURI(), Body: compactJSON(body)}
	var out any
	var eerr *eksError
	defer func() {
		if eerr != nil {
			call.Status, call.Error = eerr.status, eerr.code+": "+eerr.message
			rw.Header().Set("x-amzn-ErrorType", eerr.code)
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(eerr.status)
			_ = json.NewEncoder(rw).Encode(map[string]string{"message": eerr.message})
		} else {
			call.Status = http.StatusOK
			rw.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(rw).Encode(out)
		}
		e.Rec.Add(call)
	}()
	path := r.URL.EscapedPath()
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		// AWS_ENDPOINT_URL sends every service here: ECR's JSON 1.1
		// protocol names its operation in X-Amz-Target.
		call.Service, call.Op = "ecr", strings.TrimPrefix(t, ecrTargetPrefix)
		if t != ecrTargetPrefix+"GetAuthorizationToken" || r.Method != http.MethodPost || path != "/" {
			eerr = &eksError{http.StatusBadRequest, "UnknownOperationException", "the recording endpoint does not serve " + t}
			return
		}
		region := signedRegion(r.Header.Get("Authorization"))
		call.Target = region
		out = ecrAuthorization(region)
		return
	}
	var args []string
	for _, rt := range eksRoutes {
		if rt.method != r.Method {
			continue
		}
		if m := rt.re.FindStringSubmatch(path); m != nil {
			call.Op = rt.op
			for _, a := range m[1:] {
				s, _ := url.PathUnescape(a)
				args = append(args, s)
			}
			break
		}
	}
	if call.Op == "" {
		call.Op = "unknown"
		eerr = &eksError{http.StatusNotFound, "UnknownOperationException", "the recording endpoint does not serve " + r.Method + " " + path}
		return
	}
	var in map[string]any
	if len(body) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			eerr = &eksError{http.StatusBadRequest, "InvalidParameterException", "request body is not JSON"}
			return
		}
	}
	e.W.Lock()
	defer e.W.Unlock()
	w := e.W
	if call.Op != "DescribeAddonVersions" {
		call.Target = args[0]
		// A cluster is regional: the same name in another region (a
		// wrong --region) is not found, as EKS answers for any unknown
		// name ("No cluster found for name: <name>.", the
		// ResourceNotFoundException of DescribeCluster; the text as
		// terraform-provider-aws matches it, internal/service/eks).
		if args[0] != w.Cluster || signedRegion(r.Header.Get("Authorization")) != w.Region {
			eerr = &eksError{http.StatusNotFound, "ResourceNotFoundException", "No cluster found for name: " + args[0] + "."}
			return
		}
	}
	for _, d := range w.Denied {
		if d == call.Op {
			// IAM's refusal as EKS returns it: AccessDeniedException,
			// 403, the message naming the caller, the action and the
			// resource (IAM User Guide, "Troubleshoot access denied
			// error messages").
			eerr = &eksError{http.StatusForbidden, "AccessDeniedException", fmt.Sprintf("User: arn:aws:iam::111122223333:user/ci is not authorized to perform: eks:%s on resource: arn:aws:eks:%s:111122223333:cluster/%s", call.Op, w.Region, w.Cluster)}
			return
		}
	}
	out, eerr = e.op(call.Op, args, r.URL.Query(), in, &call)
}

func str(m map[string]any, k string) string {
	v, _ := m[k].(string)
	return v
}

func compactJSON(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	c, _ := json.Marshal(v)
	return string(c)
}

func epoch() float64 { return float64(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC).Unix()) }

func (e *EKS) op(op string, args []string, q url.Values, in map[string]any, call *Call) (any, *eksError) {
	w := e.W
	switch op {
	case "DescribeCluster":
		return map[string]any{"cluster": e.cluster()}, nil
	case "ListInsights":
		return e.insights(in)
	case "UpdateClusterVersion":
		call.Mutating = true
		v := str(in, "version")
		call.Version = v
		return e.updateCluster(v)
	case "DescribeUpdate":
		return e.describeUpdate(args[1], q.Get("nodegroupName"), q.Get("addonName"))
	case "ListAddons":
		var names []string
		for a := range w.Addons {
			names = append(names, a)
		}
		sort.Strings(names)
		return map[string]any{"addons": names}, nil
	case "DescribeAddon":
		a := args[1]
		call.Target += "/" + a
		// An add-on update in progress finishes when the add-on is read
		// (aws eks wait addon-active polls DescribeAddon).
		for _, u := range w.Updates {
			if u.Addon == a && u.Status == "InProgress" {
				e.finish(u)
			}
		}
		v, ok := w.Addons[a]
		if !ok {
			// "An error occurred (ResourceNotFoundException) when calling
			// the DescribeAddon operation: No addon: vpc-cni found in
			// cluster: my-cluster" (EKS user guide, Updating the Amazon
			// VPC CNI plugin for Kubernetes self-managed add-on).
			return nil, &eksError{http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf("No addon: %s found in cluster: %s", a, w.Cluster)}
		}
		return map[string]any{"addon": e.addon(a, v)}, nil
	case "DescribeAddonVersions":
		return e.addonVersions(q.Get("kubernetesVersion"), q.Get("addonName"))
	case "UpdateAddon":
		call.Mutating = true
		call.Target += "/" + args[1]
		call.Version = str(in, "addonVersion")
		return e.updateAddon(args[1], call.Version, str(in, "resolveConflicts"))
	case "ListNodegroups":
		var names []string
		for _, p := range w.Pools {
			names = append(names, p.Name)
		}
		sort.Strings(names)
		return map[string]any{"nodegroups": names}, nil
	case "DescribeNodegroup":
		call.Target += "/" + args[1]
		p := w.Pool(args[1])
		if p == nil {
			return nil, noNodegroup(args[1])
		}
		return map[string]any{"nodegroup": e.nodegroup(p)}, nil
	case "UpdateNodegroupVersion":
		call.Mutating = true
		call.Target += "/" + args[1]
		call.Version = str(in, "version")
		return e.updateNodegroup(args[1], call.Version, in)
	case "ListPodIdentityAssociations":
		// One page: the shapes of API_PodIdentityAssociationSummary
		// (EKS API version 2017-11-01), filtered as the query asks.
		list := []any{}
		for _, a := range w.PodIdentity {
			if (q.Get("namespace") == "" || q.Get("namespace") == a.Namespace) && (q.Get("serviceAccount") == "" || q.Get("serviceAccount") == a.ServiceAccount) {
				list = append(list, map[string]any{"clusterName": w.Cluster, "namespace": a.Namespace, "serviceAccount": a.ServiceAccount,
					"associationArn": e.associationARN(a.ID), "associationId": a.ID})
			}
		}
		return map[string]any{"associations": list}, nil
	case "DescribePodIdentityAssociation":
		call.Target += "/" + args[1]
		for _, a := range w.PodIdentity {
			if a.ID == args[1] {
				return map[string]any{"association": map[string]any{"clusterName": w.Cluster, "namespace": a.Namespace, "serviceAccount": a.ServiceAccount,
					"roleArn": a.RoleARN, "associationArn": e.associationARN(a.ID), "associationId": a.ID, "tags": map[string]string{},
					"createdAt": epoch(), "modifiedAt": epoch(), "disableSessionTags": false}}, nil
			}
		}
		// DescribePodIdentityAssociation's ResourceNotFoundException for
		// an id the cluster has no association of (fixture text).
		return nil, &eksError{http.StatusNotFound, "ResourceNotFoundException", "No Pod Identity Association found with id: " + args[1]}
	}
	return nil, &eksError{http.StatusNotFound, "UnknownOperationException", op}
}

func (e *EKS) associationARN(id string) string {
	return "arn:aws:eks:" + e.W.Region + ":111122223333:podidentityassociation/" + e.W.Cluster + "/" + id
}

// noNodegroup is DescribeNodegroup's ResourceNotFoundException for a name
// the cluster has no node group of ("No node group found for name: <name>.",
// as terraform-provider-aws matches it, internal/service/eks).
func noNodegroup(name string) *eksError {
	return &eksError{http.StatusNotFound, "ResourceNotFoundException", "No node group found for name: " + name + "."}
}

func (e *EKS) cluster() map[string]any {
	w := e.W
	status := "ACTIVE"
	for _, u := range w.Updates {
		if u.Status == "InProgress" && u.Nodegroup == "" && u.Addon == "" {
			status = "UPDATING"
		}
	}
	return map[string]any{
		"name": w.Cluster, "arn": "arn:aws:eks:" + w.Region + ":111122223333:cluster/" + w.Cluster,
		"createdAt": epoch(), "version": Minor(w.ControlPlane), "platformVersion": "eks.5", "status": status,
		"endpoint":      "https://0123456789ABCDEF.gr7." + w.Region + ".eks.amazonaws.com",
		"upgradePolicy": map[string]any{"supportType": "EXTENDED"},
	}
}

func (e *EKS) addon(name, version string) map[string]any {
	return map[string]any{"addonName": name, "clusterName": e.W.Cluster, "status": "ACTIVE", "addonVersion": version,
		"addonArn":  "arn:aws:eks:" + e.W.Region + ":111122223333:addon/" + e.W.Cluster + "/" + name + "/0",
		"createdAt": epoch(), "modifiedAt": epoch(), "health": map[string]any{"issues": []any{}}}
}

func (e *EKS) nodegroup(p *Pool) map[string]any {
	ami := "AL2023_x86_64_STANDARD"
	inst := "m7i.4xlarge"
	if p.GPUs > 0 {
		ami, inst = "AL2023_x86_64_NVIDIA", "p5.48xlarge"
	}
	status := "ACTIVE"
	for _, u := range e.W.Updates {
		if u.Status == "InProgress" && u.Nodegroup == p.Name {
			status = "UPDATING"
		}
	}
	n := len(p.Nodes)
	return map[string]any{
		"nodegroupName": p.Name, "clusterName": e.W.Cluster, "version": Minor(p.Version),
		"releaseVersion": p.Version + "-20261201", "status": status, "capacityType": "ON_DEMAND", "amiType": ami,
		"instanceTypes": []string{inst}, "createdAt": epoch(), "modifiedAt": epoch(),
		"nodegroupArn":  "arn:aws:eks:" + e.W.Region + ":111122223333:nodegroup/" + e.W.Cluster + "/" + p.Name + "/0",
		"scalingConfig": map[string]any{"minSize": n, "maxSize": n, "desiredSize": n},
		"updateConfig":  map[string]any{"maxUnavailable": 1},
		"labels":        map[string]string{}, "health": map[string]any{"issues": []any{}},
	}
}

func (e *EKS) newUpdate(typ, nodegroup, addon string, params map[string]string) map[string]any {
	w := e.W
	u := &Update{ID: fmt.Sprintf("4a9e1c2b-0000-4000-8000-%012d", len(w.Updates)+1), Type: typ, Status: "InProgress",
		Nodegroup: nodegroup, Addon: addon, Params: params}
	w.Updates = append(w.Updates, u)
	return map[string]any{"update": e.update(u)}
}

func (e *EKS) update(u *Update) map[string]any {
	var params []map[string]string
	var keys []string
	for k := range u.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		params = append(params, map[string]string{"type": k, "value": u.Params[k]})
	}
	return map[string]any{"id": u.ID, "status": u.Status, "type": u.Type, "params": params, "createdAt": epoch(), "errors": []any{}}
}

// busy is the ResourceInUseException of an update while another runs:
// "Cannot VersionUpdate because cluster cpinjani-eks currently has update
// cd26335b-... in progress" (rancher/eks-operator#547, StatusCode 409).
func (e *EKS) busy(typ, nodegroup string) *eksError {
	for _, u := range e.W.Updates {
		if u.Status == "InProgress" && u.Nodegroup == nodegroup {
			what := "cluster " + e.W.Cluster
			if nodegroup != "" {
				what = "nodegroup " + nodegroup
			}
			return &eksError{http.StatusConflict, "ResourceInUseException", fmt.Sprintf("Cannot %s because %s currently has update %s in progress", typ, what, u.ID)}
		}
	}
	return nil
}

// updateCluster enforces EKS's rules for UpdateClusterVersion:
//   - one minor at a time: "Unsupported Kubernetes minor version update
//     from 1.13 to 1.15" (InvalidParameterException, rancher/rancher#26908;
//     the same text for a version not newer, rancher/rancher#21043);
//   - managed node groups on the control plane's minor first: "Nodegroups
//     eks-stg-gp must be updated to match cluster version 1.18 before
//     updating cluster version" (InvalidParameterException,
//     hashicorp/terraform-provider-aws#19478; EKS user guide
//     update-cluster.html: "make sure that the Kubernetes minor version of
//     both the managed nodes and Fargate nodes in your cluster are the same
//     as your control plane's current version");
//   - no second update while one runs (ResourceInUseException).
func (e *EKS) updateCluster(v string) (any, *eksError) {
	w := e.W
	if !regexp.MustCompile(`^1\.\d+$`).MatchString(v) {
		// "InvalidParameterException: unsupported Kubernetes version"
		// (finos/compliant-financial-infrastructure#228).
		return nil, &eksError{http.StatusBadRequest, "InvalidParameterException", "unsupported Kubernetes version"}
	}
	if err := e.busy("VersionUpdate", ""); err != nil {
		return nil, err
	}
	cur := Minor(w.ControlPlane)
	if minorNum(v) != minorNum(cur)+1 {
		return nil, &eksError{http.StatusBadRequest, "InvalidParameterException", fmt.Sprintf("Unsupported Kubernetes minor version update from %s to %s", cur, v)}
	}
	var behind []string
	for _, p := range w.Pools {
		if Minor(p.Version) != cur {
			behind = append(behind, p.Name)
		}
	}
	if len(behind) > 0 {
		return nil, &eksError{http.StatusBadRequest, "InvalidParameterException", fmt.Sprintf("Nodegroups %s must be updated to match cluster version %s before updating cluster version", strings.Join(behind, ","), cur)}
	}
	return e.newUpdate("VersionUpdate", "", "", map[string]string{"Version": v, "PlatformVersion": "eks.1"}), nil
}

// updateNodegroup enforces UpdateNodegroupVersion's rules: the node group
// exists, no update runs on it, and its version is not newer than the
// control plane's ("Node version ... must not have a greater minor version
// than master version" is GKE's; EKS answers a version other than the
// cluster's and the allowed releases with "Requested Nodegroup release
// version 1.17.9-20200723 is invalid. Allowed release version is
// 1.16.13-20200723", InvalidParameterException,
// hashicorp/terraform-provider-aws#14492). Without a version the node group
// moves to the cluster's (API_UpdateNodegroupVersion: "If you don't
// specify a Kubernetes version, then the latest available AMI version for
// the cluster's current Kubernetes version is used").
func (e *EKS) updateNodegroup(name, v string, in map[string]any) (any, *eksError) {
	w := e.W
	p := w.Pool(name)
	if p == nil {
		return nil, noNodegroup(name)
	}
	if err := e.busy("VersionUpdate", name); err != nil {
		return nil, err
	}
	cur := Minor(w.ControlPlane)
	if v == "" {
		v = cur
	}
	if minorNum(v) > minorNum(cur) || !regexp.MustCompile(`^1\.\d+$`).MatchString(v) {
		return nil, &eksError{http.StatusBadRequest, "InvalidParameterException",
			fmt.Sprintf("Requested Nodegroup release version %s-20261201 is invalid. Allowed release version is %s-20261201", Patch(v), Patch(cur))}
	}
	params := map[string]string{"Version": v, "ReleaseVersion": Patch(v) + "-20261201"}
	return e.newUpdate("VersionUpdate", name, "", params), nil
}

// updateAddon enforces UpdateAddon's rules: the add-on is an EKS add-on
// of the cluster, the version is one EKS lists for the cluster's
// Kubernetes version ("InvalidParameterException: Addon version specified
// is not supported", aws/aws-sdk-go-v2#2554), and the VPC CNI moves one
// minor at a time ("Updating VPC-CNI can only go up or down 1 minor
// version at a time", terraform-aws-modules/terraform-aws-eks#2749).
func (e *EKS) updateAddon(name, v, resolve string) (any, *eksError) {
	w := e.W
	cur, ok := w.Addons[name]
	if !ok {
		return nil, &eksError{http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf("No addon: %s found in cluster: %s", name, w.Cluster)}
	}
	if resolve != "" && resolve != "OVERWRITE" && resolve != "NONE" && resolve != "PRESERVE" {
		return nil, &eksError{http.StatusBadRequest, "InvalidParameterException", "Invalid resolveConflicts value " + resolve}
	}
	if v == "" {
		v = eksAddonVersion(name, Minor(w.ControlPlane))
	}
	supported := false
	for _, c := range eksCompatible(name, Minor(w.ControlPlane)) {
		supported = supported || c == v
	}
	if !supported {
		return nil, &eksError{http.StatusBadRequest, "InvalidParameterException", "Addon version specified is not supported"}
	}
	if name == "vpc-cni" {
		if d := addonMinor(v) - addonMinor(cur); d > 1 || d < -1 {
			return nil, &eksError{http.StatusBadRequest, "InvalidParameterException", "Updating VPC-CNI can only go up or down 1 minor version at a time"}
		}
	}
	params := map[string]string{"AddonVersion": v}
	if resolve != "" {
		params["ResolveConflicts"] = resolve
	}
	return e.newUpdate("AddonUpdate", "", name, params), nil
}

// describeUpdate returns an update; an update in progress finishes when
// it is first described (the endpoint's stand-in for the minutes EKS
// takes, so that a wait loop's sleep never runs).
func (e *EKS) describeUpdate(id, nodegroup, addon string) (any, *eksError) {
	for _, u := range e.W.Updates {
		if u.ID != id || u.Nodegroup != nodegroup || u.Addon != addon {
			continue
		}
		u.Seen++
		if u.Status == "InProgress" {
			e.finish(u)
		}
		return map[string]any{"update": e.update(u)}, nil
	}
	return nil, &eksError{http.StatusNotFound, "ResourceNotFoundException", "No update found for ID: " + id}
}

// Settle finishes every update still in progress (time passes between
// two pasted blocks).
func (e *EKS) Settle() {
	e.W.Lock()
	defer e.W.Unlock()
	for _, u := range e.W.Updates {
		if u.Status == "InProgress" {
			e.finish(u)
		}
	}
}

func (e *EKS) finish(u *Update) {
	w := e.W
	u.Status = "Successful"
	switch {
	case u.Addon != "":
		w.Addons[u.Addon] = u.Params["AddonVersion"]
	case u.Nodegroup != "":
		p := w.Pool(u.Nodegroup)
		p.Version = Patch(u.Params["Version"])
		for _, n := range p.Nodes {
			n.Kubelet = p.Version
		}
	default:
		w.ControlPlane = Patch(u.Params["Version"])
	}
}

// insights answers ListInsights: the filter's categories and statuses
// must be the API's enums (Category UPGRADE_READINESS, MISCONFIGURATION;
// InsightStatusValue PASSING, WARNING, ERROR, UNKNOWN). Every insight of
// the cluster passes.
func (e *EKS) insights(in map[string]any) (any, *eksError) {
	f, _ := in["filter"].(map[string]any)
	match := func(key, v string, enum ...string) (bool, *eksError) {
		l, ok := f[key].([]any)
		if !ok || len(l) == 0 {
			return true, nil
		}
		hit := false
		for _, x := range l {
			s, _ := x.(string)
			if len(enum) > 0 {
				valid := false
				for _, e := range enum {
					valid = valid || e == s
				}
				if !valid {
					return false, &eksError{http.StatusBadRequest, "InvalidParameterException", fmt.Sprintf("Invalid %s value: %s", key, s)}
				}
			}
			hit = hit || s == v
		}
		return hit, nil
	}
	w := e.W
	next := nextMinor(Minor(w.ControlPlane))
	insight := map[string]any{"id": "5d3c2b1a-0000-4000-8000-000000000001", "name": "Kubelet version skew", "category": "UPGRADE_READINESS",
		"kubernetesVersion": next, "lastRefreshTime": epoch(), "lastTransitionTime": epoch(),
		"description":   "Checks for kubelet versions of worker nodes in the cluster to see if upgrade would cause noncompliance with supported Kubernetes kubelet version skew policy.",
		"insightStatus": map[string]any{"status": "PASSING", "reason": "No issues found."}}
	ok1, err := match("categories", "UPGRADE_READINESS", "UPGRADE_READINESS", "MISCONFIGURATION")
	if err != nil {
		return nil, err
	}
	ok2, err := match("statuses", "PASSING", "PASSING", "WARNING", "ERROR", "UNKNOWN")
	if err != nil {
		return nil, err
	}
	ok3, _ := match("kubernetesVersions", next)
	list := []any{}
	if ok1 && ok2 && ok3 {
		list = append(list, insight)
	}
	return map[string]any{"insights": list}, nil
}

func (e *EKS) addonVersions(k8s, name string) (any, *eksError) {
	if k8s == "" {
		k8s = Minor(e.W.ControlPlane)
	}
	var addons []any
	for _, a := range eksAddons {
		if name != "" && a != name {
			continue
		}
		var vs []any
		for i, v := range eksCompatible(a, k8s) {
			vs = append(vs, map[string]any{"addonVersion": v, "architecture": []string{"amd64", "arm64"},
				"compatibilities":       []any{map[string]any{"clusterVersion": k8s, "platformVersions": []string{"*"}, "defaultVersion": i == 0}},
				"requiresConfiguration": false})
		}
		addons = append(addons, map[string]any{"addonName": a, "type": "networking", "addonVersions": vs, "publisher": "eks", "owner": "aws"})
	}
	return map[string]any{"addons": addons}, nil
}

// ecrTargetPrefix is the X-Amz-Target prefix of ECR's operations
// (botocore 1.43.11 data/ecr/2015-09-21/service-2.json: protocol json 1.1,
// targetPrefix AmazonEC2ContainerRegistry_V20150921).
const ecrTargetPrefix = "AmazonEC2ContainerRegistry_V20150921."

// ECRPassword is the registry password the lane's ECR token carries.
const ECRPassword = "local-ecr-password"

// ecrAuthorization answers GetAuthorizationToken in its model's shape
// (GetAuthorizationTokenResponse.authorizationData: a list of
// AuthorizationData, authorizationToken base64 of user:password,
// expiresAt, proxyEndpoint https://ACCOUNT.dkr.ecr.REGION.amazonaws.com;
// botocore 1.43.11 ecr 2015-09-21): aws ecr get-login-password prints the
// password part (awscli customizations/ecr.py, ECRGetLoginPassword).
func ecrAuthorization(region string) map[string]any {
	return map[string]any{"authorizationData": []any{map[string]any{
		"authorizationToken": base64.StdEncoding.EncodeToString([]byte("AWS:" + ECRPassword)),
		"expiresAt":          epoch() + 12*3600,
		"proxyEndpoint":      "https://" + eksImageAccount + ".dkr.ecr." + region + ".amazonaws.com",
	}}}
}

// eksImageAccount is the account of the EKS add-on images in the lane's
// regions (us-west-2: 602401143452, as the EKS add-on image tables list
// it, https://docs.aws.amazon.com/eks/latest/userguide/add-ons-images.html).
const eksImageAccount = "602401143452"
