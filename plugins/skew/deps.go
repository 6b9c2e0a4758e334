package skew

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// deps are the outside world the command talks to besides the cluster;
// tests replace them.
type deps struct {
	now     func() time.Time
	kubectl func(ctx context.Context) (string, error)
	tags    func(insecure bool) pkgskew.TagLister
}

func defaultDeps() deps {
	return deps{now: time.Now, kubectl: kubectlOnPath, tags: func(insecure bool) pkgskew.TagLister { return pkgskew.RemoteTagLister(insecure) }}
}

// kubectlTimeout bounds `kubectl version --client`.
const kubectlTimeout = 5 * time.Second

// kubectlOnPath returns the gitVersion of the kubectl on PATH.
func kubectlOnPath(ctx context.Context) (string, error) {
	path, err := exec.LookPath("kubectl")
	if err != nil {
		return "", fmt.Errorf("%w: %v", pkgskew.ErrNoKubectl, err)
	}
	ctx, cancel := context.WithTimeout(ctx, kubectlTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "version", "--client", "-o", "json").Output()
	if ctx.Err() != nil {
		return "", fmt.Errorf("%s version --client: no answer within %s", path, kubectlTimeout)
	}
	if err != nil {
		return "", fmt.Errorf("%s version --client: %v", path, err)
	}
	var v struct {
		ClientVersion struct {
			GitVersion string `json:"gitVersion"`
		} `json:"clientVersion"`
	}
	if err := json.Unmarshal(out, &v); err != nil || v.ClientVersion.GitVersion == "" {
		return "", fmt.Errorf("%s version --client -o json: unexpected output", path)
	}
	return strings.TrimSpace(v.ClientVersion.GitVersion), nil
}

// onceKubectl returns kubectl asked once: the local kubectl is the same
// for every context of a sweep, and `kubectl version --client` is a
// process of about 200 ms of CPU, which a sweep of fifty contexts spent
// fifty times over. The first answer, error or not, serves every later
// call.
func onceKubectl(kubectl func(ctx context.Context) (string, error)) func(ctx context.Context) (string, error) {
	if kubectl == nil {
		return nil
	}
	var (
		once    sync.Once
		version string
		err     error
	)
	return func(ctx context.Context) (string, error) {
		once.Do(func() { version, err = kubectl(ctx) })
		return version, err
	}
}

// listClient returns a clientset for the inventory's lists. Against a real
// server it asks for protobuf, which decodes nodes several times faster
// than JSON; a fake clientset (tests) is used as it is.
func listClient(cg cli.ClientGetter) (kubernetes.Interface, error) {
	kc, err := cg.Kube()
	if err != nil {
		return nil, err
	}
	if rc, ok := kc.CoreV1().RESTClient().(*rest.RESTClient); !ok || rc == nil {
		return kc, nil
	}
	cfg, err := cg.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	pc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return kc, nil
	}
	return pc, nil
}

// errNoInventory marks a saved report without an inventory.
var errNoInventory = errors.New("the file holds no inventory: save one with `kubectl skew -o yaml > FILE`")
