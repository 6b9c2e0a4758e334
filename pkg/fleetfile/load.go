package fleetfile

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/health"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
)

// Error is a fleet file that cannot be used: the file, the field path and
// what is wrong, on one line.
type Error struct {
	File  string
	Field string
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// LoadFile reads and checks a fleet file.
func LoadFile(path string) (*Fleet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot read the fleet file: " + errText(err)}
	}
	f, err := Load(data)
	if err != nil {
		var fe *Error
		if errors.As(err, &fe) {
			fe.File = path
		}
		return nil, err
	}
	return f, nil
}

func errText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Load decodes a fleet file strictly (YAML or JSON) and checks it. The
// first problem found is returned as an *Error with its field path.
func Load(data []byte) (*Fleet, error) {
	// YAMLToJSONStrict refuses duplicate keys, which plain YAML decoding
	// resolves silently to the last one.
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, &Error{Msg: "not valid YAML: " + yamlText(err)}
	}
	if strings.TrimSpace(string(js)) == "null" {
		return nil, &Error{Msg: "the file is empty; want apiVersion " + APIVersion + ", kind " + Kind}
	}
	var f Fleet
	strict, err := sigsjson.UnmarshalStrict(js, &f)
	if err != nil {
		return nil, &Error{Msg: decodeText(err)}
	}
	if len(strict) > 0 {
		// sigs.k8s.io/json names the path: unknown field "spec.rings[0].soke".
		return nil, &Error{Msg: strict[0].Error()}
	}
	if errs := Validate(&f); len(errs) > 0 {
		e := errs[0]
		return nil, &Error{Field: e.Field, Msg: errDetail(e)}
	}
	return &f, nil
}

var yamlLine = regexp.MustCompile(`^error converting YAML to JSON: `)

// yamlText folds the YAML decoder's multi-line "unmarshal errors" into one
// line.
func yamlText(err error) string {
	s := yamlLine.ReplaceAllString(err.Error(), "")
	s = strings.Replace(s, "unmarshal errors:\n", "", 1)
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// bandwidthType is the json type error of a hydrateBandwidth that is not a
// map: "cannot unmarshal number into Go struct field
// Upgrade.spec.upgrade.hydrateBandwidth of type map[string]string".
var bandwidthType = regexp.MustCompile(`cannot unmarshal (\w+) into Go struct field \w+\.(\S*hydrateBandwidth) of type map\[string\]string`)

// decodeText turns a json type error into one line naming the field; a
// hydrateBandwidth that is not a map also says the form it wants.
func decodeText(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "json: ")
	if m := bandwidthType.FindStringSubmatch(s); m != nil {
		return fmt.Sprintf("%s: want a map of weight source to bytes per second, e.g. {object-store: 1250M/s}, not a %s", m[2], m[1])
	}
	return s
}

func errDetail(e *field.Error) string {
	switch e.Type {
	case field.ErrorTypeRequired:
		if e.Detail != "" {
			return "required: " + e.Detail
		}
		return "required"
	case field.ErrorTypeDuplicate:
		return fmt.Sprintf("duplicate value %v", e.BadValue)
	case field.ErrorTypeNotSupported, field.ErrorTypeInvalid:
		if e.BadValue != nil && fmt.Sprint(e.BadValue) != "" {
			return fmt.Sprintf("%q: %s", fmt.Sprint(e.BadValue), e.Detail)
		}
		return e.Detail
	}
	return e.ErrorBody()
}

// Validate checks a decoded fleet and returns every problem with its path.
func Validate(f *Fleet) field.ErrorList {
	var errs field.ErrorList
	if f.APIVersion != APIVersion {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), f.APIVersion, "want "+APIVersion))
	}
	if f.Kind != Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), f.Kind, "want "+Kind))
	}
	md := field.NewPath("metadata")
	if f.Metadata.Name == "" {
		errs = append(errs, field.Required(md.Child("name"), "the fleet's name, a DNS label"))
	} else {
		errs = append(errs, dnsLabel(md.Child("name"), f.Metadata.Name)...)
	}
	errs = append(errs, labels(md.Child("labels"), f.Metadata.Labels)...)

	sp := field.NewPath("spec")
	if t := f.Spec.Target; t != nil {
		if !versionRE.MatchString(t.Version) {
			errs = append(errs, field.Invalid(sp.Child("target", "version"), t.Version, "want vMAJOR.MINOR or vMAJOR.MINOR.PATCH"))
		}
	}
	errs = append(errs, validateClusters(sp.Child("clusters"), f.Spec.Clusters)...)
	errs = append(errs, validateRings(sp.Child("rings"), f.Spec.Rings)...)
	c := f.Spec.Caps
	if c.MaxConcurrentClusters < 0 {
		errs = append(errs, field.Invalid(sp.Child("caps", "maxConcurrentClusters"), strconv.Itoa(c.MaxConcurrentClusters), "must be 0 (no cap) or more"))
	}
	if c.MaxGPUPercentInFlight < 0 || c.MaxGPUPercentInFlight > 100 {
		errs = append(errs, field.Invalid(sp.Child("caps", "maxGPUPercentInFlight"), strconv.Itoa(c.MaxGPUPercentInFlight), "a percent: 0 (no cap) to 100"))
	}
	names := map[string]bool{}
	for _, cl := range f.Spec.Clusters {
		names[cl.Name] = true
	}
	for i, n := range c.GPUCapExceptions {
		if !names[n] {
			errs = append(errs, field.Invalid(sp.Child("caps", "gpuCapExceptions").Index(i), n, "not a cluster of spec.clusters"))
		}
	}
	for i, w := range f.Spec.Windows {
		p := sp.Child("windows").Index(i)
		errs = append(errs, selector(p.Child("selector"), w.Selector)...)
		if strings.TrimSpace(w.Schedule) == "" {
			errs = append(errs, field.Required(p.Child("schedule"), "a five-field cron expression"))
		} else if strings.HasPrefix(strings.TrimSpace(w.Schedule), "@every") {
			errs = append(errs, field.Invalid(p.Child("schedule"), w.Schedule, "@every has no fixed opening time: give a cron expression or @daily, @weekly"))
		} else if strings.HasPrefix(strings.TrimSpace(w.Schedule), "@") {
			if _, err := w.parseSchedule(); err != nil {
				errs = append(errs, field.Invalid(p.Child("schedule"), w.Schedule, "not a cron descriptor: "+err.Error()))
			}
		} else if len(strings.Fields(w.Schedule)) != 5 {
			errs = append(errs, field.Invalid(p.Child("schedule"), w.Schedule, "want a five-field cron expression (minute hour day-of-month month day-of-week)"))
		} else if strings.Contains(w.Schedule, "TZ=") {
			errs = append(errs, field.Invalid(p.Child("schedule"), w.Schedule, "set the zone in timeZone, not in the schedule"))
		} else if _, err := w.parseSchedule(); err != nil {
			errs = append(errs, field.Invalid(p.Child("schedule"), w.Schedule, "not a cron expression: "+err.Error()))
		}
		errs = append(errs, duration(p.Child("duration"), w.Duration, true)...)
		errs = append(errs, duration(p.Child("finishMargin"), w.FinishMargin, false)...)
		if w.TimeZone != "" {
			if _, err := time.LoadLocation(w.TimeZone); err != nil {
				errs = append(errs, field.Invalid(p.Child("timeZone"), w.TimeZone, "not an IANA time zone name (America/Los_Angeles, UTC)"))
			}
		}
		if w.Duration.Value() > 0 && w.FinishMargin.Value() >= w.Duration.Value() {
			errs = append(errs, field.Invalid(p.Child("finishMargin"), string(w.FinishMargin), "leaves no time in the window: must be shorter than duration"))
		}
	}
	for i, fr := range f.Spec.Freezes {
		p := sp.Child("freezes").Index(i)
		s, err1 := ParseInstant(fr.Start)
		if err1 != nil {
			errs = append(errs, field.Invalid(p.Child("start"), fr.Start, "want YYYY-MM-DD or an RFC 3339 time"))
		}
		e, err2 := ParseInstant(fr.End)
		if err2 != nil {
			errs = append(errs, field.Invalid(p.Child("end"), fr.End, "want YYYY-MM-DD or an RFC 3339 time"))
		}
		if err1 == nil && err2 == nil && !e.After(s) && fr.End != fr.Start {
			errs = append(errs, field.Invalid(p.Child("end"), fr.End, "ends before the freeze starts"))
		}
		errs = append(errs, selector(p.Child("selector"), fr.Selector)...)
	}
	if d := f.Spec.DRPairs; d != nil && d.LabelKey != "" {
		for _, m := range validation.IsQualifiedName(d.LabelKey) {
			errs = append(errs, field.Invalid(sp.Child("drPairs", "labelKey"), d.LabelKey, m))
		}
	}
	promqls := 0
	for i, h := range f.Spec.HaltOn {
		p := sp.Child("haltOn").Index(i)
		if !haltChecks[h.Check] {
			errs = append(errs, field.NotSupported(p.Child("check"), h.Check, sortedKeys(haltChecks)))
		}
		if h.Check == "alerts" {
			if u, err := url.Parse(h.AlertmanagerURL); h.AlertmanagerURL == "" {
				errs = append(errs, field.Required(p.Child("alertmanagerURL"), "the Alertmanager whose active alerts halt (http://alertmanager.monitoring:9093)"))
			} else if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, field.Invalid(p.Child("alertmanagerURL"), h.AlertmanagerURL, "want http(s)://HOST[:PORT][/PATH]"))
			}
			if h.ClusterLabel != "" {
				for _, m := range validation.IsQualifiedName(h.ClusterLabel) {
					errs = append(errs, field.Invalid(p.Child("clusterLabel"), h.ClusterLabel, m))
				}
			}
		}
		if h.Check == "promql" {
			if promqls++; promqls == 2 {
				errs = append(errs, field.Duplicate(p.Child("check"), h.Check))
			}
			u, qs := h.PromQLFor("c")
			if h.PrometheusURL == "" {
				errs = append(errs, field.Required(p.Child("prometheusURL"), "the Prometheus the queries run against (http://prometheus.monitoring:9090)"))
			} else if health.ValidatePrometheusURL(u) != nil {
				errs = append(errs, field.Invalid(p.Child("prometheusURL"), h.PrometheusURL, "want http(s)://HOST[:PORT][/PATH]"))
			}
			if len(qs) == 0 {
				errs = append(errs, field.Required(p.Child("queries"), "a list of {name, expr, and one of maxRatio, minRatio, max, min}"))
			}
			seen := map[string]bool{}
			for j, q := range qs {
				if err := q.Validate(); err != nil {
					errs = append(errs, field.Invalid(p.Child("queries").Index(j), q.Name, err.Error()))
				} else if seen[q.Name] {
					errs = append(errs, field.Duplicate(p.Child("queries").Index(j).Child("name"), q.Name))
				}
				seen[q.Name] = true
			}
		}
	}
	if u := f.Spec.Upgrade; u != nil {
		errs = append(errs, duration(sp.Child("upgrade", "stepDuration"), u.StepDuration, false)...)
		for _, k := range slices.Sorted(maps.Keys(u.StepDurations)) {
			kp := sp.Child("upgrade", "stepDurations").Key(k)
			if !slices.Contains(DisruptiveKinds, k) {
				errs = append(errs, field.NotSupported(kp, k, DisruptiveKinds))
				continue
			}
			errs = append(errs, duration(kp, u.StepDurations[k], true)...)
		}
		errs = append(errs, validateDrain(sp.Child("upgrade", "drain"), u.Drain)...)
		errs = append(errs, validateBandwidth(sp.Child("upgrade", "hydrateBandwidth"), u.HydrateBandwidth)...)
		for i, a := range u.Actions {
			p := sp.Child("upgrade", "actions").Index(i)
			errs = append(errs, selector(p.Child("selector"), a.Selector)...)
			n := 0
			if a.ClusterAPI != nil {
				n++
				if a.ClusterAPI.ManagementContext == "" {
					errs = append(errs, field.Required(p.Child("clusterAPI", "managementContext"), "the kubeconfig context of the management cluster"))
				}
				if a.ClusterAPI.Namespace == "" {
					errs = append(errs, field.Required(p.Child("clusterAPI", "namespace"), "the namespace of the Cluster objects"))
				}
				if err := CheckCommandTemplate(a.ClusterAPI.EtcdSnapshot); err != nil {
					errs = append(errs, field.Invalid(p.Child("clusterAPI", "etcdSnapshot"), a.ClusterAPI.EtcdSnapshot, err.Error()))
				}
			}
			if a.Command != nil {
				n++
				if a.Command.ControlPlane == "" && a.Command.Pool == "" {
					errs = append(errs, field.Required(p.Child("command"), "a controlPlane or pool command template"))
				}
				for _, t := range []struct{ name, v string }{{"controlPlane", a.Command.ControlPlane}, {"pool", a.Command.Pool}, {"etcdSnapshot", a.Command.EtcdSnapshot},
					{"holdRollouts", a.Command.HoldRollouts}, {"releaseRollouts", a.Command.ReleaseRollouts}} {
					if err := CheckCommandTemplate(t.v); err != nil {
						errs = append(errs, field.Invalid(p.Child("command", t.name), t.v, err.Error()))
					}
				}
			}
			if a.Manual != nil {
				n++
			}
			if n != 1 {
				errs = append(errs, field.Invalid(p, "", "set exactly one of clusterAPI, command, manual"))
			}
		}
	}
	if c := f.Spec.Credentials; c != nil {
		cp := sp.Child("credentials")
		if c.SecretNamespace == "" {
			errs = append(errs, field.Required(cp.Child("secretNamespace"), "the namespace of the kubeconfig Secrets"))
		} else {
			errs = append(errs, dnsLabel(cp.Child("secretNamespace"), c.SecretNamespace)...)
		}
		if c.NameTemplate != "" {
			for _, m := range validation.IsDNS1123Subdomain(c.SecretName("x")) {
				errs = append(errs, field.Invalid(cp.Child("nameTemplate"), c.NameTemplate, m))
			}
		}
	}
	if e := f.Spec.Engine; e != nil && e.Argo != nil {
		ap := sp.Child("engine", "argo")
		if e.Argo.Namespace != "" {
			errs = append(errs, dnsLabel(ap.Child("namespace"), e.Argo.Namespace)...)
		}
		errs = append(errs, labels(ap.Child("nodeSelector"), e.Argo.NodeSelector)...)
		errs = append(errs, duration(ap.Child("retryInterval"), e.Argo.RetryInterval, false)...)
		errs = append(errs, duration(ap.Child("retryCap"), e.Argo.RetryCap, false)...)
	}
	if s := f.Spec.Store; s != nil {
		if !storeRE.MatchString(s.URL) {
			errs = append(errs, field.Invalid(sp.Child("store", "url"), s.URL, "want a directory (relative to the fleet file), file:///path, s3://bucket/prefix, gs://bucket/prefix or azblob://container/prefix"))
		}
	}
	return errs
}

var (
	versionRE = regexp.MustCompile(`^v?[0-9]+\.[0-9]+(\.[0-9]+)?$`)
	storeRE   = regexp.MustCompile(`^((file|s3|gs|azblob)://.+|[^:]+)$`)
)

// onTimeouts are gang-drain's --on-timeout values (pkg/gang).
var onTimeouts = map[string]bool{"stop": true, "abort": true, "wait": true}

var haltChecks = map[string]bool{
	"verify-regressions": true,
	"gpu-allocatable":    true,
	"nodes-not-ready":    true,
	"apiserver-429-rate": true,
	"gpu-validate":       true,
	"alerts":             true,
	"promql":             true,
}

func sortedKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }

func validateClusters(p *field.Path, cs []Cluster) field.ErrorList {
	var errs field.ErrorList
	if len(cs) == 0 {
		errs = append(errs, field.Required(p, "at least one cluster"))
	}
	names := map[string]int{}
	for i, c := range cs {
		cp := p.Index(i)
		if c.Name == "" {
			errs = append(errs, field.Required(cp.Child("name"), "the cluster's name, a DNS label"))
		} else {
			errs = append(errs, dnsLabel(cp.Child("name"), c.Name)...)
			if j, dup := names[c.Name]; dup {
				errs = append(errs, field.Invalid(cp.Child("name"), c.Name, fmt.Sprintf("cluster listed twice (also %s)", p.Index(j))))
			}
			names[c.Name] = i
		}
		if c.Provider != "" && !providers[c.Provider] {
			errs = append(errs, field.NotSupported(cp.Child("provider"), c.Provider, sortedKeys(providers)))
		}
		errs = append(errs, labels(cp.Child("labels"), c.Labels)...)
		if c.GPUs != nil && *c.GPUs < 0 {
			errs = append(errs, field.Invalid(cp.Child("gpus"), strconv.Itoa(*c.GPUs), "must be 0 or more"))
		}
		errs = append(errs, validateDrain(cp.Child("drain"), c.Drain)...)
		errs = append(errs, validateBandwidth(cp.Child("hydrateBandwidth"), c.HydrateBandwidth)...)
	}
	return errs
}

// validateBandwidth checks a hydrate bandwidth (spec.upgrade's or a
// cluster's) as gang-drain parses its --hydrate-bandwidth: a known source
// and a byte quantity per second for each.
func validateBandwidth(bp *field.Path, bw map[string]string) field.ErrorList {
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(bw)) {
		if _, err := inference.ParseBandwidth([]string{k + "=" + bw[k]}); err != nil || strings.Contains(bw[k], ",") {
			msg := "want a byte quantity per second, e.g. 1250M/s"
			if _, serr := inference.ParseSource(k); serr != nil || k == "" {
				msg = fmt.Sprintf("unknown weight source %q: want one of %s", k, strings.Join(sourceNames(), ", "))
			}
			errs = append(errs, field.Invalid(bp.Key(k), bw[k], msg))
		}
	}
	return errs
}

func sourceNames() []string {
	var out []string
	for _, s := range inference.Sources {
		out = append(out, string(s))
	}
	return out
}

// validateDrain checks gang-drain settings (spec.upgrade.drain or a
// cluster's own).
func validateDrain(dp *field.Path, d *Drain) field.ErrorList {
	if d == nil {
		return nil
	}
	var errs field.ErrorList
	if d.OnTimeout != "" && !onTimeouts[d.OnTimeout] {
		errs = append(errs, field.NotSupported(dp.Child("onTimeout"), d.OnTimeout, sortedKeys(onTimeouts)))
	}
	errs = append(errs, duration(dp.Child("ackTimeout"), d.AckTimeout, false)...)
	errs = append(errs, duration(dp.Child("checkpointDeadline"), d.CheckpointDeadline, false)...)
	errs = append(errs, duration(dp.Child("evictionTimeout"), d.EvictionTimeout, false)...)
	return errs
}

var providers = map[string]bool{
	"kubeadm": true, "eks": true, "gke": true, "aks": true,
	"clusterapi": true, "k3s": true, "rke2": true, "unknown": true,
}

func validateRings(p *field.Path, rs []Ring) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for i, r := range rs {
		rp := p.Index(i)
		if r.Name == "" {
			errs = append(errs, field.Required(rp.Child("name"), "the ring's name, a DNS label"))
		} else {
			errs = append(errs, dnsLabel(rp.Child("name"), r.Name)...)
			if names[r.Name] {
				errs = append(errs, field.Invalid(rp.Child("name"), r.Name, "ring listed twice"))
			}
			names[r.Name] = true
		}
		sel := r.Selector
		errs = append(errs, selector(rp.Child("selector"), &sel)...)
		errs = append(errs, duration(rp.Child("soak"), r.Soak, false)...)
		if r.MaxConcurrent < 0 {
			errs = append(errs, field.Invalid(rp.Child("maxConcurrent"), strconv.Itoa(r.MaxConcurrent), "must be 0 (the fleet cap alone) or more"))
		}
		if r.MaxFailures < 0 {
			errs = append(errs, field.Invalid(rp.Child("maxFailures"), strconv.Itoa(r.MaxFailures), "must be 0 or more"))
		}
		if r.Approval != nil && r.Approval.Approvers < 0 {
			errs = append(errs, field.Invalid(rp.Child("approval", "approvers"), strconv.Itoa(r.Approval.Approvers), "must be 0 (one approver) or more"))
		}
	}
	return errs
}

func dnsLabel(p *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	for _, m := range validation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(p, v, m))
	}
	return errs
}

func labels(p *field.Path, ls map[string]string) field.ErrorList {
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(ls)) {
		for _, m := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, "label key: "+m))
		}
		for _, m := range validation.IsValidLabelValue(ls[k]) {
			errs = append(errs, field.Invalid(p.Key(k), ls[k], "label value: "+m))
		}
	}
	return errs
}

func selector(p *field.Path, s *metav1.LabelSelector) field.ErrorList {
	if s == nil {
		return nil
	}
	if _, err := metav1.LabelSelectorAsSelector(s); err != nil {
		return field.ErrorList{field.Invalid(p, "", "not a valid label selector: "+err.Error())}
	}
	return nil
}

func duration(p *field.Path, d Duration, required bool) field.ErrorList {
	if d == "" {
		if required {
			return field.ErrorList{field.Required(p, `a duration such as "4h" or "30m"`)}
		}
		return nil
	}
	v, err := parseDuration(string(d))
	if err != nil || v < 0 {
		return field.ErrorList{field.Invalid(p, string(d), `want a duration such as "48h", "30m" or "1h30m"`)}
	}
	return nil
}

// parseDuration reads a Go duration, and whole days ("3d") since soaks are
// often written in days.
func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, err
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// ParseInstant reads YYYY-MM-DD (midnight UTC) or an RFC 3339 time.
func ParseInstant(s string) (time.Time, error) {
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339, s)
}
