package fleetrun

import (
	"context"
	"os"
	"testing"

	"github.com/gpufleet/upgrade-plugins/pkg/localcluster"
)

// TestBlobStoreVersityGW runs the store's contracts on a real S3 server
// that checks conditional writes: the Versity S3 Gateway v1.8.0 with its
// posix backend, built by `e2e/tools/build.sh versitygw` (e2e/fleet builds
// it and runs every store there). Of concurrent Updates from one ETag
// exactly one wins and the rest get 412, mapped to ErrConflict.
func TestBlobStoreVersityGW(t *testing.T) {
	s, srv := versityStore(t, "unit")
	storeContract(t, s)
	casContract(t, s)
	if t.Failed() {
		t.Log(srv.Log(4000))
	}
}

// TestRunnersRaceOnOneStepVersityGW is TestRunnersRaceOnOneStep with the
// store on versitygw: the claim's If-Match is what lets one runner in.
func TestRunnersRaceOnOneStepVersityGW(t *testing.T) {
	s, srv := versityStore(t, "race")
	h := newHarness(t, nil)
	if _, err := FreezePlan(context.Background(), s, h.p.Plan, false); err != nil {
		t.Fatal(err)
	}
	h.p.Store = s
	raceOneStep(t, h)
	if t.Failed() {
		t.Log(srv.Log(4000))
	}
}

// versityStore starts versitygw for the test and opens a store on it,
// skipping the test when the binary is not built.
func versityStore(t *testing.T, prefix string) (Store, *localcluster.S3Server) {
	t.Helper()
	bin := localcluster.VersityGWIn(localcluster.CacheDir())
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("versitygw is not built (%v): run e2e/tools/build.sh versitygw", err)
	}
	ctx := context.Background()
	srv, err := localcluster.StartVersityGW(ctx, bin, t.TempDir(), "fleet")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": localcluster.S3AccessKey, "AWS_SECRET_ACCESS_KEY": localcluster.S3SecretKey, "AWS_REGION": "us-east-1",
		"AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull, "AWS_PROFILE": "", "AWS_SESSION_TOKEN": "",
	} {
		t.Setenv(k, v)
	}
	s, err := OpenStore(ctx, "s3://fleet/"+prefix+"?endpoint="+srv.Endpoint+"&use_path_style=true&disable_https=true&region=us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, srv
}
