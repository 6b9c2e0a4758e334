package skew

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/preflight"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// policyFlags are preflight's flags of the policy-continuity gates.
type policyFlags struct {
	ProbeFiles   []string
	CertWarnDays int
	CertFailDays int
	Patches      string
	PatchMaxDays int

	probes      []preflight.ProbeManifest
	probeErrors []string
}

func (f *policyFlags) addFlags(cmd *cobra.Command) {
	f.CertWarnDays, f.CertFailDays = preflight.DefaultCertWarnDays, preflight.DefaultCertFailDays
	cmd.Flags().StringArrayVar(&f.ProbeFiles, "probe-file", f.ProbeFiles, "Manifests (YAML or JSON) that an admission policy must deny, sent as server-side dry-run creates and replayed by verify (repeatable), such as a pod running an unsigned image.")
	cmd.Flags().IntVar(&f.CertWarnDays, "cert-warn-days", f.CertWarnDays, "The certificates gate warns about a certificate that expires within this many days.")
	cmd.Flags().IntVar(&f.CertFailDays, "cert-fail-days", f.CertFailDays, "The certificates gate fails on a certificate that expires within this many days.")
	f.PatchMaxDays = preflight.DefaultPatchMaxDays
	cmd.Flags().StringVar(&f.Patches, "patches", f.Patches, "Patch release data file (the newest patch of each minor, as pkg/skew's patches.json) instead of the embedded one.")
	cmd.Flags().IntVar(&f.PatchMaxDays, "patch-max-days", f.PatchMaxDays, "The patch-level gate warns when the cluster is more days than this behind the newest patch of its minor.")
	_ = cmd.MarkFlagFilename("probe-file", "yaml", "yml", "json")
	_ = cmd.MarkFlagFilename("patches", "yaml", "yml", "json")
}

// complete reads --patches into the calendar and the probe files. A probe
// file that does not exist, cannot be read or is empty is refused (exit
// 3, as every input file: most often a mistyped path); one that does not
// parse is a line of the admission-probes gate (UNKNOWN), not the end of
// the run: the other gates still run.
func (f *policyFlags) complete(cal pkgskew.Calendar) (pkgskew.Calendar, error) {
	if f.Patches != "" {
		p, err := loadDataFile(f.Patches, "--patches", pkgskew.DefaultPatches, pkgskew.ParsePatches)
		if err != nil {
			return cal, err
		}
		cal = cal.WithPatches(p)
	}
	for _, path := range f.ProbeFiles {
		data, err := cli.ReadInputFile("--probe-file", path)
		if err != nil {
			return cal, err
		}
		ms, err := preflight.ParseProbeFile(path, data)
		if err != nil {
			f.probeErrors = append(f.probeErrors, err.Error())
			continue
		}
		f.probes = append(f.probes, ms...)
	}
	return cal, nil
}

func (f *policyFlags) validate() error {
	if f.CertFailDays < 0 || f.CertWarnDays < f.CertFailDays {
		return fmt.Errorf("--cert-warn-days %d and --cert-fail-days %d: want 0 <= fail <= warn", f.CertWarnDays, f.CertFailDays)
	}
	if f.PatchMaxDays < 0 {
		return fmt.Errorf("--patch-max-days %d: want 0 or more", f.PatchMaxDays)
	}
	return nil
}

func (f *policyFlags) apply(r *preflight.Runner) {
	r.Policy.Probes, r.Policy.ProbeErrors = f.probes, f.probeErrors
	r.Policy.CertWarnDays, r.Policy.CertFailDays, r.Policy.PatchMaxDays = f.CertWarnDays, f.CertFailDays, f.PatchMaxDays
}

// servingCertificates returns the certificates the apiserver presents on
// the kubeconfig's own connection (its proxy and TLS settings included).
func servingCertificates(cg cli.ClientGetter) func(ctx context.Context) ([]*x509.Certificate, error) {
	return func(ctx context.Context) ([]*x509.Certificate, error) {
		cfg, err := cg.ToRESTConfig()
		if err != nil {
			return nil, err
		}
		rt, err := rest.TransportFor(cfg)
		if err != nil {
			return nil, err
		}
		u, _, err := rest.DefaultServerUrlFor(cfg)
		if err != nil {
			return nil, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.JoinPath("/version").String(), nil)
		if err != nil {
			return nil, err
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		_ = resp.Body.Close()
		if resp.TLS == nil {
			return nil, fmt.Errorf("%s is not served over TLS", u.Host)
		}
		return resp.TLS.PeerCertificates, nil
	}
}
