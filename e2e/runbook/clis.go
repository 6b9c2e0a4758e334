package runbooke2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
)

// CLIs are the versions of the provider CLIs the lane pastes into, read
// from the tools themselves: aws --version (aws-cli/1.45.11 Python/...
// botocore/1.43.11), gcloud version --format=json ("Google Cloud SDK"),
// az version --output json ("azure-cli").
type CLIs struct {
	AWS, Botocore, GCloud, Az string
}

var awsVersion = regexp.MustCompile(`aws-cli/(\S+) .*botocore/(\S+)`)

// ReadCLIs asks each installed CLI its version; a CLI that is missing or
// does not answer is an error, except az when az is false (no AKS
// scenario runs: az is installed for those only, see the Makefile's
// e2e-deps).
func ReadCLIs(ctx context.Context, az bool) (CLIs, error) {
	var c CLIs
	out, err := exec.CommandContext(ctx, "aws", "--version").CombinedOutput()
	if err != nil {
		return c, fmt.Errorf("aws --version: %v: %s", err, out)
	}
	m := awsVersion.FindStringSubmatch(string(out))
	if m == nil {
		return c, fmt.Errorf("aws --version: no aws-cli/ and botocore/ in %q", out)
	}
	c.AWS, c.Botocore = m[1], m[2]
	out, err = exec.CommandContext(ctx, "gcloud", "version", "--format=json").Output()
	if err != nil {
		return c, fmt.Errorf("gcloud version: %v", err)
	}
	var g map[string]any
	if err := json.Unmarshal(out, &g); err != nil {
		return c, fmt.Errorf("gcloud version: %v", err)
	}
	c.GCloud, _ = g["Google Cloud SDK"].(string)
	if c.Az = azVersion(ctx); c.Az == "" && az {
		return c, fmt.Errorf("az version: no azure-cli version")
	}
	if c.GCloud == "" {
		return c, fmt.Errorf("gcloud version: no Google Cloud SDK version in %s", out)
	}
	return c, nil
}

// Names are the phrases README.md names the versions with (azure-cli's
// only when az was read).
func (c CLIs) Names() []string {
	n := []string{"aws-cli " + c.AWS, "botocore " + c.Botocore, "Google Cloud SDK " + c.GCloud}
	if c.Az != "" {
		n = append(n, "azure-cli "+c.Az)
	}
	return n
}
