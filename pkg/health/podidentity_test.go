package health

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// eksServer answers the two EKS operations with the response bodies in
// testdata/eks (each as the EKS API Reference, version 2017-11-01, shows
// its response syntax: ListPodIdentityAssociations' associations and
// nextToken, DescribePodIdentityAssociation's association), or refuses
// every call as EKS refuses a caller without the IAM action.
type eksServer struct {
	mu      sync.Mutex
	paths   []string
	regions []string
	deny    bool
}

func (s *eksServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.paths = append(s.paths, r.Method+" "+r.URL.RequestURI())
	s.regions = append(s.regions, signedRegion(r.Header.Get("Authorization")))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if s.deny {
		// A rest-json error: the code in x-amzn-ErrorType, the text in
		// the body's message.
		w.Header().Set("x-amzn-ErrorType", "AccessDeniedException")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"message":"User: arn:aws:iam::111122223333:user/ci is not authorized to perform: eks:ListPodIdentityAssociations on resource: arn:aws:eks:us-west-2:111122223333:cluster/train-prod"}`))
		return
	}
	var file string
	switch {
	case r.URL.Path == "/clusters/train-prod/pod-identity-associations" && r.URL.Query().Get("nextToken") == "":
		file = "list-pod-identity-associations-1.json"
	case r.URL.Path == "/clusters/train-prod/pod-identity-associations" && r.URL.Query().Get("nextToken") == "eyJhc3NvY2lhdGlvbklkIjoiYS1hYmMifQ==":
		file = "list-pod-identity-associations-2.json"
	case r.URL.Path == "/clusters/train-prod/pod-identity-associations/a-abcdefghijklmnop1":
		file = "describe-pod-identity-association-1.json"
	case r.URL.Path == "/clusters/train-prod/pod-identity-associations/a-abcdefghijklmnop2":
		file = "describe-pod-identity-association-2.json"
	default:
		w.Header().Set("x-amzn-ErrorType", "ResourceNotFoundException")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"message":"No cluster found for name: x."}`))
		return
	}
	b, err := os.ReadFile(filepath.Join("testdata", "eks", file))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write(b)
}

func signedRegion(auth string) string {
	_, rest, ok := strings.Cut(auth, "Credential=")
	if !ok {
		return ""
	}
	scope := strings.Split(strings.SplitN(rest, ",", 2)[0], "/")
	if len(scope) < 3 {
		return ""
	}
	return scope[2]
}

// awsEnv isolates the SDK's default configuration from this machine's:
// static credentials from the environment (or none), no shared files, no
// instance metadata.
func awsEnv(t *testing.T, creds bool) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_PROFILE": "", "AWS_REGION": "", "AWS_DEFAULT_REGION": "",
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_EKS": "",
	} {
		t.Setenv(k, v)
	}
	if creds {
		t.Setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
	}
}

func TestListPodIdentityAssociations(t *testing.T) {
	awsEnv(t, true)
	srv := &eksServer{}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	acc := EKSPodIdentityAccess{Cluster: "train-prod", Region: "us-west-2", Endpoint: hs.URL}
	c, err := NewEKSClient(context.Background(), acc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ListPodIdentityAssociations(context.Background(), c, "train-prod")
	if err != nil {
		t.Fatal(err)
	}
	want := []IdentityBinding{
		{Namespace: "kube-system", ServiceAccount: "ebs-csi-controller-sa", Provider: IdentityEKSPodIdentity, Identity: "arn:aws:iam::111122223333:role/AmazonEKS_EBS_CSI_DriverRole", AssociationID: "a-abcdefghijklmnop2"},
		{Namespace: "ml", ServiceAccount: "s3-reader", Provider: IdentityEKSPodIdentity, Identity: "arn:aws:iam::111122223333:role/s3-reader -> arn:aws:iam::444455556666:role/bucket-owner", AssociationID: "a-abcdefghijklmnop1"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	// Two pages (nextToken followed) and one describe per association,
	// signed for the region asked.
	if len(srv.paths) != 4 || srv.paths[0] != "GET /clusters/train-prod/pod-identity-associations" ||
		srv.paths[1] != "GET /clusters/train-prod/pod-identity-associations?nextToken=eyJhc3NvY2lhdGlvbklkIjoiYS1hYmMifQ%3D%3D" {
		t.Errorf("calls %q", srv.paths)
	}
	for _, r := range srv.regions {
		if r != "us-west-2" {
			t.Errorf("signed for region %q", r)
		}
	}
}

func TestPodIdentityUnreachable(t *testing.T) {
	acc := EKSPodIdentityAccess{Cluster: "train-prod", Region: "us-west-2"}
	t.Run("access denied", func(t *testing.T) {
		awsEnv(t, true)
		hs := httptest.NewServer(&eksServer{deny: true})
		defer hs.Close()
		a := acc
		a.Endpoint = hs.URL
		c, err := NewEKSClient(context.Background(), a)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ListPodIdentityAssociations(context.Background(), c, "train-prod")
		msg := PodIdentityUnreachable(a, err)
		for _, s := range []string{"EKS cluster train-prod in us-west-2", "AccessDeniedException", "needs eks:ListPodIdentityAssociations (and eks:DescribePodIdentityAssociation)", "user/ci is not authorized"} {
			if !strings.Contains(msg, s) {
				t.Errorf("%q lacks %q", msg, s)
			}
		}
	})
	t.Run("no such cluster", func(t *testing.T) {
		awsEnv(t, true)
		hs := httptest.NewServer(&eksServer{})
		defer hs.Close()
		a := EKSPodIdentityAccess{Cluster: "other", Region: "us-west-2", Endpoint: hs.URL}
		c, err := NewEKSClient(context.Background(), a)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ListPodIdentityAssociations(context.Background(), c, "other")
		if msg := PodIdentityUnreachable(a, err); !strings.Contains(msg, "no such cluster (ResourceNotFoundException") {
			t.Errorf("%q", msg)
		}
	})
	t.Run("no credentials", func(t *testing.T) {
		awsEnv(t, false)
		_, err := NewEKSClient(context.Background(), acc)
		if err == nil {
			t.Fatal("want an error without credentials")
		}
		if msg := PodIdentityUnreachable(acc, err); !strings.Contains(msg, "not listed: no AWS credentials") {
			t.Errorf("%q", msg)
		}
	})
	t.Run("no region", func(t *testing.T) {
		awsEnv(t, true)
		_, err := NewEKSClient(context.Background(), EKSPodIdentityAccess{Cluster: "train-prod"})
		if err == nil || !strings.Contains(err.Error(), "no AWS region for EKS cluster train-prod") {
			t.Errorf("%v", err)
		}
	})
}

// A dry-run pod of an associated ServiceAccount, as the webhook returns it
// (amazon-eks-pod-identity-webhook v0.6.17's expected patch for a pod
// without volumes, pkg/handler/testdata/containercredentials/
// rawPodWithoutVolumes.pod.yaml, with the main.go defaults): the
// environment and the token volume are what the gate records.
func TestInjectedIntoPodIdentity(t *testing.T) {
	b := IdentityBinding{Namespace: "ml", ServiceAccount: "s3-reader", Provider: IdentityEKSPodIdentity}
	sent := IdentityProbePod(b)
	got := sent.DeepCopy()
	got.Spec.Volumes = append(got.Spec.Volumes, projectedToken("eks-pod-identity-token", "pods.eks.amazonaws.com"))
	c := &got.Spec.Containers[0]
	c.Env = append(c.Env, envVar(EnvContainerCredentialsFullURI, "http://169.254.170.23/v1/credentials"),
		envVar(EnvContainerAuthorizationTokenFile, "/var/run/secrets/pods.eks.amazonaws.com/serviceaccount/eks-pod-identity-token"))
	c.VolumeMounts = append(c.VolumeMounts, mount("eks-pod-identity-token", "/var/run/secrets/pods.eks.amazonaws.com/serviceaccount"))
	inj := InjectedInto(IdentityEKSPodIdentity, sent, got)
	if s := inj.String(); s != "env AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, AWS_CONTAINER_CREDENTIALS_FULL_URI; token volume audience pods.eks.amazonaws.com at /var/run/secrets/pods.eks.amazonaws.com/serviceaccount" {
		t.Errorf("injected %q", s)
	}
	// The association gone: the change names it and the ServiceAccount.
	b.Identity, b.AssociationID = "arn:aws:iam::111122223333:role/s3-reader", "a-abcdefghijklmnop1"
	ch := DiffIdentities([]IdentityFact{{IdentityBinding: b, Injected: &inj}}, nil)
	if len(ch) != 1 || !ch[0].Gone || !strings.Contains(ch[0].String(), "ServiceAccount ml/s3-reader: its EKS Pod Identity association a-abcdefghijklmnop1") {
		t.Errorf("%+v", ch)
	}
}

func projectedToken(name, audience string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
		ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: audience, ExpirationSeconds: ptr.To[int64](79200), Path: name}}}}}}
}

func envVar(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

func mount(name, path string) corev1.VolumeMount {
	return corev1.VolumeMount{Name: name, MountPath: path, ReadOnly: true}
}
