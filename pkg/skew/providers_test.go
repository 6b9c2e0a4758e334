package skew

import (
	"strings"
	"testing"
	"time"
)

func TestProviderCalendarEmbedded(t *testing.T) {
	pc, err := ParseProviderCalendar(embeddedProviders)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pc.Providers {
		if !strings.HasPrefix(p.Source, "https://") || p.Checked == "" {
			t.Errorf("%s: source %q checked %q: every provider names its page and date", p.Provider, p.Source, p.Checked)
		}
	}
	if _, r, _, ok := pc.lookup(ProviderEKS, mustMinor(t, "1.30")); !ok || r.EndOfExtendedSupport != "2026-07-23" {
		t.Errorf("EKS 1.30 = %+v, %v; want extended support to 2026-07-23 (EKS release calendar)", r, ok)
	}
}

func mustMinor(t *testing.T, s string) Version {
	t.Helper()
	v, err := ParseVersion(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSupportOn(t *testing.T) {
	cal := DefaultCalendar()
	day := func(s string) time.Time { d, _ := time.Parse(dateLayout, s); return d.Add(12 * time.Hour) }
	tests := []struct {
		name     string
		minor    string
		provider Provider
		now      string
		status   Status
		window   string
		ends     string
		msg      string
	}{
		// Upstream 1.30 ended 2025-07-15; EKS standard 2025-07-23, extended 2026-07-23.
		{"eks past upstream, in extended", "1.30", ProviderEKS, "2026-03-01", StatusEdge, WindowExtended, "2026-07-23", "extended support until 2026-07-23 (144 days)"},
		{"eks past upstream, in standard", "1.31", ProviderEKS, "2025-11-20", StatusEdge, WindowStandard, "2025-11-26", "EKS standard support ends on 2025-11-26, in 6 days"},
		{"eks past extended", "1.30", ProviderEKS, "2026-08-01", StatusViolation, WindowExtended, "2026-07-23", "EKS extended support ended on 2026-07-23 (9 days ago)"},
		{"eks standard with room", "1.34", ProviderEKS, "2026-03-01", StatusOK, WindowStandard, "2026-12-02", "extended support until 2027-12-02"},
		{"eks minor not sourced", "1.36", ProviderEKS, "2026-09-01", StatusOK, WindowUpstream, "2027-06-28", "supported until 2027-06-28"},
		{"upstream past eol", "1.30", ProviderKubeadm, "2026-03-01", StatusViolation, WindowUpstream, "2025-07-15", "reached end of life on 2025-07-15"},
		{"aks lts", "1.30", ProviderAKS, "2026-01-10", StatusEdge, WindowExtended, "2026-07", "LTS until 2026-07"},
		{"aks month only, past", "1.31", ProviderAKS, "2025-11-02", StatusViolation, WindowStandard, "2025-11", "AKS community support ended on 2025-11"},
		{"gke falls back to upstream", "1.33", ProviderGKE, "2026-09-01", StatusViolation, WindowUpstream, "2026-06-28", "reached end of life"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := cal.SupportOn(mustMinor(t, tc.minor), tc.provider, day(tc.now))
			if s.Status != tc.status || s.Window != tc.window || s.SupportEnds != tc.ends || !strings.Contains(s.Message, tc.msg) {
				t.Errorf("got %s %s %s %q; want %s %s %s containing %q", s.Status, s.Window, s.SupportEnds, s.Message, tc.status, tc.window, tc.ends, tc.msg)
			}
			if tc.window == WindowUpstream && tc.provider.Managed() && s.Note == "" {
				t.Errorf("a managed provider judged by the upstream date needs a note saying so")
			}
		})
	}
}

func TestParseProviderCalendarErrors(t *testing.T) {
	for in, want := range map[string]string{
		`{"dataDate":"2026-01-01","providers":[{"provider":"openshift","source":"x","releases":[]}]}`:                                                                                   "want eks, gke or aks",
		`{"dataDate":"2026-01-01","providers":[{"provider":"eks","source":"","releases":[]}]}`:                                                                                          "no source",
		`{"dataDate":"2026-01-01","providers":[{"provider":"eks","source":"x","releases":[{"minor":"1.30","endOfStandardSupport":"July 2025"}]}]}`:                                      "want YYYY-MM-DD or YYYY-MM",
		`{"dataDate":"2026-01-01","providers":[{"provider":"eks","source":"x","releases":[{"minor":"1.30","endOfStandardSupport":"2025-07-23","endOfExtendedSupport":"2025-01-01"}]}]}`: "extended support ends before standard",
		`{"dataDate":"x","providers":[]}`: "dataDate",
	} {
		if _, err := ParseProviderCalendar([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", in, err, want)
		}
	}
}
