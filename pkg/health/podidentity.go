package health

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/smithy-go"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EKS Pod Identity binds a ServiceAccount to an IAM role with an
// association kept in the EKS API, not an annotation on the
// ServiceAccount: ListPodIdentityAssociations
// (GET /clusters/{clusterName}/pod-identity-associations) and
// DescribePodIdentityAssociation
// (GET /clusters/{clusterName}/pod-identity-associations/{associationId}),
// EKS API version 2017-11-01 (Amazon EKS API Reference; the operations and
// shapes as aws-sdk-go-v2/service/eks v1.104.2 serves them). The same
// amazon-eks-pod-identity-webhook that injects IRSA injects, for a pod of
// an associated ServiceAccount, AWS_CONTAINER_CREDENTIALS_FULL_URI
// (default http://169.254.170.23/v1/credentials, served by the
// eks-pod-identity-agent DaemonSet) and AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE
// with the projected token volume eks-pod-identity-token, audience
// pods.eks.amazonaws.com, at /var/run/secrets/pods.eks.amazonaws.com/serviceaccount
// (amazon-eks-pod-identity-webhook v0.6.17: pkg/constants.go
// AwsEnvVarContainerCredentialsFullUri, AwsEnvVarContainerAuthorizationTokenFile;
// main.go --container-credentials-* defaults).

// IdentityEKSPodIdentity is an EKS Pod Identity association.
const IdentityEKSPodIdentity = "eks-pod-identity"

// Pod Identity's injected environment (amazon-eks-pod-identity-webhook
// v0.6.17 pkg/constants.go).
const (
	EnvContainerCredentialsFullURI     = "AWS_CONTAINER_CREDENTIALS_FULL_URI"
	EnvContainerAuthorizationTokenFile = "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"
)

// IAM actions the listing needs (the service prefix eks and the operation
// name, as IAM's Service Authorization Reference lists them for Amazon
// EKS).
const (
	ActionListPodIdentityAssociations    = "eks:ListPodIdentityAssociations"
	ActionDescribePodIdentityAssociation = "eks:DescribePodIdentityAssociation"
)

// EKSPodIdentityAccess says which EKS cluster's associations are listed.
type EKSPodIdentityAccess struct {
	// Cluster is the EKS cluster's name.
	Cluster string `json:"cluster"`
	// Region is its AWS region ("" : the SDK's own, AWS_REGION or the
	// profile's).
	Region string `json:"region,omitempty"`
	// Endpoint overrides the EKS endpoint (the SDK's BaseEndpoint); the
	// SDK also reads AWS_ENDPOINT_URL_EKS and AWS_ENDPOINT_URL.
	Endpoint string `json:"-"`
}

// EKSPodIdentityAPI is the part of the EKS client the listing calls.
type EKSPodIdentityAPI interface {
	eks.ListPodIdentityAssociationsAPIClient
	DescribePodIdentityAssociation(context.Context, *eks.DescribePodIdentityAssociationInput, ...func(*eks.Options)) (*eks.DescribePodIdentityAssociationOutput, error)
}

// errNoCredentials marks a failure to find AWS credentials.
var errNoCredentials = errors.New("no AWS credentials")

// NewEKSClient loads the SDK's default configuration (environment, shared
// config and credentials files, SSO, web identity, the instance's role)
// for the region, and makes sure credentials are found before any call.
func NewEKSClient(ctx context.Context, acc EKSPodIdentityAccess) (*eks.Client, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if acc.Region != "" {
		opts = append(opts, awsconfig.WithRegion(acc.Region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("no AWS region for EKS cluster %s: give --eks-region or set AWS_REGION", acc.Cluster)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if cfg.Credentials == nil {
		return nil, fmt.Errorf("%w (environment, shared files, SSO, web identity or instance role)", errNoCredentials)
	}
	if _, err := cfg.Credentials.Retrieve(cctx); err != nil {
		return nil, fmt.Errorf("%w (environment, shared files, SSO, web identity or instance role): %v", errNoCredentials, err)
	}
	return eks.NewFromConfig(cfg, func(o *eks.Options) {
		if acc.Endpoint != "" {
			o.BaseEndpoint = aws.String(acc.Endpoint)
		}
	}), nil
}

// ListPodIdentityAssociations lists every association of the cluster
// (following nextToken) and describes each for its role. Each becomes a
// binding of provider IdentityEKSPodIdentity whose Identity is the role
// ARN (and the target role where one is chained) and whose AssociationID
// names it in the EKS API.
func ListPodIdentityAssociations(ctx context.Context, c EKSPodIdentityAPI, cluster string) ([]IdentityBinding, error) {
	var out []IdentityBinding
	p := eks.NewListPodIdentityAssociationsPaginator(c, &eks.ListPodIdentityAssociationsInput{ClusterName: aws.String(cluster)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, a := range page.Associations {
			out = append(out, IdentityBinding{Namespace: aws.ToString(a.Namespace), ServiceAccount: aws.ToString(a.ServiceAccount),
				Provider: IdentityEKSPodIdentity, AssociationID: aws.ToString(a.AssociationId)})
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	errs := make([]error, len(out))
	for i := range out {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			d, err := c.DescribePodIdentityAssociation(ctx, &eks.DescribePodIdentityAssociationInput{ClusterName: aws.String(cluster), AssociationId: aws.String(out[i].AssociationID)})
			if err != nil {
				errs[i] = err
				return
			}
			if d.Association != nil {
				out[i].Identity = aws.ToString(d.Association.RoleArn)
				if t := aws.ToString(d.Association.TargetRoleArn); t != "" {
					out[i].Identity += " -> " + t
				}
			}
		}(i)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out, nil
}

// PodIdentityUnreachable says in one line why the associations could not
// be listed: no credentials, access denied (naming the IAM action), no
// such cluster, or the error.
func PodIdentityUnreachable(acc EKSPodIdentityAccess, err error) string {
	where := "EKS cluster " + acc.Cluster
	if acc.Region != "" {
		where += " in " + acc.Region
	}
	if errors.Is(err, errNoCredentials) {
		return "EKS Pod Identity associations of " + where + " not listed: " + err.Error()
	}
	action := ActionListPodIdentityAssociations
	var oe *smithy.OperationError
	if errors.As(err, &oe) && oe.OperationName != "" {
		action = "eks:" + oe.OperationName
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "AccessDeniedException", "AccessDenied", "UnauthorizedException":
			return fmt.Sprintf("EKS Pod Identity associations of %s not listed: %s: the caller needs %s (and %s): %s",
				where, ae.ErrorCode(), action, other(action), ae.ErrorMessage())
		case "ResourceNotFoundException":
			return fmt.Sprintf("EKS Pod Identity associations of %s not listed: no such cluster (%s: %s)", where, ae.ErrorCode(), ae.ErrorMessage())
		}
	}
	return fmt.Sprintf("EKS Pod Identity associations of %s not listed: %s: %v", where, action, err)
}

func other(action string) string {
	if action == ActionListPodIdentityAssociations {
		return ActionDescribePodIdentityAssociation
	}
	return ActionListPodIdentityAssociations
}

// PodIdentityCommand lists the associations as the gate does.
func PodIdentityCommand(acc EKSPodIdentityAccess) string {
	region := ""
	if acc.Region != "" {
		region = " --region " + acc.Region
	}
	return fmt.Sprintf("aws eks list-pod-identity-associations%s --cluster-name %s", region, acc.Cluster)
}

// podIdentityGone says an association disappeared.
func podIdentityGone(b IdentityBinding) string {
	id := ""
	if b.AssociationID != "" {
		id = " " + b.AssociationID
	}
	return fmt.Sprintf("ServiceAccount %s/%s: its EKS Pod Identity association%s (%s) is gone from the EKS API; its pods get no AWS credentials",
		b.Namespace, b.ServiceAccount, id, strings.TrimSpace(b.Identity))
}

// EKSPodIdentityAgentDaemonSet is the DaemonSet in kube-system that
// serves EKS Pod Identity credentials on each node: the EKS add-on
// eks-pod-identity-agent installs it under that name (AWS docs, "Set up
// the Amazon EKS Pod Identity Agent": the agent "runs on each node" and
// its pods are `kubectl get pods -n kube-system | grep
// 'eks-pod-identity-agent'`; aws/eks-pod-identity-agent at 00bc058,
// charts/eks-pod-identity-agent/values.yaml: fullnameOverride
// "eks-pod-identity-agent"). A pod on a node whose agent is not ready
// gets no credentials from the association: the SDKs read them from the
// agent at 169.254.170.23 on the node. EKS Auto Mode builds the agent in
// and runs no such DaemonSet.
const EKSPodIdentityAgentDaemonSet = "eks-pod-identity-agent"

// EKSPodIdentityAgentHybridDaemonSets are the agent's DaemonSets for EKS
// Hybrid Nodes, in kube-system beside the cloud one: the add-on's chart
// renders one DaemonSet per entry of daemonsets, named with the entry's
// nameSuffix ("hybrid" and "hybrid-bottlerocket"; the cloud entry has
// none), and keeps the cloud DaemonSet off nodes labelled
// eks.amazonaws.com/compute-type=hybrid while the hybrid ones run only
// there, reading the node's own AWS credentials from /eks-hybrid/.aws
// (/var/eks-hybrid/.aws on Bottlerocket) with --rotate-credentials
// (aws/eks-pod-identity-agent v0.1.37, charts/eks-pod-identity-agent/
// values.yaml daemonsets and affinity, templates/daemonset.yaml,
// templates/_helpers.tpl addSuffixAndTrim). AWS docs, "Configure add-ons
// for hybrid nodes": the EKS Pod Identity Agent add-on supports hybrid
// nodes from v1.3.3-eksbuild.1 (Bottlerocket from v1.3.7-eksbuild.2). A
// pod on a hybrid node gets its credentials from these, not from the
// cloud DaemonSet.
var EKSPodIdentityAgentHybridDaemonSets = []string{EKSPodIdentityAgentDaemonSet + "-hybrid", EKSPodIdentityAgentDaemonSet + "-hybrid-bottlerocket"}

// NodeAgent is a node agent's DaemonSet in kube-system as read.
type NodeAgent struct {
	Name string `json:"name"`
	// Found says the DaemonSet exists.
	Found   bool  `json:"found"`
	Desired int32 `json:"desired,omitempty"`
	Ready   int32 `json:"ready,omitempty"`
	// Excused counts its pods not ready on nodes NotReady or cordoned
	// (see DaemonPodsNotReady).
	Excused int32 `json:"excused,omitempty"`
	// NotReadyOn names the Ready, schedulable nodes where its pod is not
	// ready.
	NotReadyOn []string `json:"notReadyOn,omitempty"`
}

// ReadNodeAgent finds DaemonSet kube-system/name among dss (Excused and
// NotReadyOn are the caller's, from DaemonPodsNotReady).
func ReadNodeAgent(name string, dss []*appsv1.DaemonSet) NodeAgent {
	a := NodeAgent{Name: name}
	for _, ds := range dss {
		if ds.Namespace == metav1.NamespaceSystem && ds.Name == name {
			a.Found, a.Desired, a.Ready = true, ds.Status.DesiredNumberScheduled, ds.Status.NumberReady
		}
	}
	return a
}

// OK says every pod it should run is ready, apart from those on nodes
// that are down or cordoned.
func (a NodeAgent) OK() bool { return a.Found && a.Ready+a.Excused >= a.Desired }

func (a NodeAgent) String() string {
	if !a.Found {
		return "no DaemonSet kube-system/" + a.Name
	}
	s := fmt.Sprintf("DaemonSet kube-system/%s: %d of %d pods ready%s", a.Name, a.Ready, a.Desired, excusedNote(a.Excused))
	if len(a.NotReadyOn) > 0 {
		s += "; not ready on Ready, schedulable node " + strings.Join(a.NotReadyOn, ", ")
	}
	return s
}
