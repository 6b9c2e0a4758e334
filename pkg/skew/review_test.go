package skew

import (
	"regexp"
	"strings"
	"testing"
)

// Regression tests for defects an independent review found in the check
// and the plan.

// A mid-upgrade HA control plane: one of three apiservers is on 1.36. The
// apiserver step must say that one is already on 1.36 and two remain, not
// print the remainder under the words "already on".
func TestPlanMidUpgradeCountsAlreadyUpgraded(t *testing.T) {
	inv := Inventory{Server: ServerVersion{GitVersion: "v1.35.4"}, Components: []Component{
		comp(KindAPIServer, "kube-apiserver-cp-0", "v1.36.1"),
		comp(KindAPIServer, "kube-apiserver-cp-1", "v1.35.4"),
		comp(KindAPIServer, "kube-apiserver-cp-2", "v1.35.4"),
	}, Pools: []Pool{pool("train", "v1.35.4")}}
	p, err := MakePlan(inv, MustParseVersion("v1.36"), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var action string
	for _, s := range p.Steps {
		if s.Phase == PhaseAPIServers {
			action = s.Action
		}
	}
	if want := "upgrade the 2 remaining kube-apiserver instances (1 of 3 already on 1.36) to 1.36 one at a time"; !strings.Contains(action, want) {
		t.Errorf("apiserver step %q, want it to contain %q", action, want)
	}
}

// "HA apiservers are mixed" only where more than one instance exists or
// may exist.
func TestPlanMixedApiserversOnlyWithSeveral(t *testing.T) {
	apis := func(n int) []Component {
		var cs []Component
		for i := 0; i < n; i++ {
			cs = append(cs, comp(KindAPIServer, "kube-apiserver-cp-"+string(rune('0'+i)), "v1.35.4"))
		}
		return cs
	}
	forbidden := []Component{{Name: KindAPIServer, State: StateForbidden, Source: "pods kube-system component=kube-apiserver"}}
	for _, tc := range []struct {
		name  string
		comps []Component
		mixed bool
	}{
		{"one visible instance", apis(1), false},
		{"none visible, not managed", nil, false},
		{"three visible instances", apis(3), true},
		{"kube-system forbidden: there may be several", forbidden, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := Inventory{Server: ServerVersion{GitVersion: "v1.35.4"}, Components: tc.comps, Pools: []Pool{pool("train", "v1.35.4")}}
			p, err := MakePlan(inv, MustParseVersion("v1.37"), PlanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			all := strings.Join(p.Warnings, "\n")
			for _, s := range p.Steps {
				all += "\n" + s.Action + "\n" + s.Note
			}
			if got := strings.Contains(all, "mixed"); got != tc.mixed {
				t.Errorf("says apiservers are mixed: %v, want %v\n%s", got, tc.mixed, all)
			}
		})
	}
}

var oneMinors = regexp.MustCompile(`\b1 (minors|kube-apiserver instances|nodes|hops)\b`)

// Counts of one are singular everywhere a message counts minors.
func TestCountGrammar(t *testing.T) {
	inv := Inventory{Server: ServerVersion{GitVersion: "v1.36.2"}, Components: []Component{
		comp(KindAPIServer, "kube-apiserver-cp-0", "v1.36.2"),
		comp(KindControllerManager, "kube-controller-manager-cp-0", "v1.35.1"),
	}, Pools: []Pool{pool("train", "v1.35.4")}}
	fs, _ := Check(inv)
	var msgs []string
	for _, f := range fs {
		msgs = append(msgs, f.Message)
	}
	c := DefaultCalendar()
	msgs = append(msgs, c.Support(MustParseVersion("v1.36.0"), day("2026-12-02")).Message)
	msgs = append(msgs, FleetPolicy{Lag: 0}.Check(MustParseVersion("v1.36.0"), MustParseVersion("v1.37")).Message)
	p, err := MakePlan(inv, MustParseVersion("v1.37"), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Steps {
		msgs = append(msgs, s.Action, s.Note)
	}
	msgs = append(msgs, p.Warnings...)
	all := strings.Join(msgs, "\n")
	if m := oneMinors.FindAllString(all, -1); len(m) > 0 {
		t.Errorf("plural after one: %q in\n%s", m, all)
	}
	if !strings.Contains(all, "1 minor behind") {
		t.Errorf("no singular count found to check in\n%s", all)
	}
}

// The summary's max skew counts kubectl too.
func TestMaxSkewCountsKubectl(t *testing.T) {
	inv := Inventory{Server: ServerVersion{GitVersion: "v1.37.2"}, Components: []Component{
		{Name: KindKubectl, Instance: "PATH", Version: "v1.35.0", State: StateVisible},
	}, Pools: []Pool{pool("train", "v1.37.2")}}
	_, sum := Check(inv)
	if sum.MaxSkew != 2 {
		t.Errorf("max skew %d, want 2 (kubectl two minors behind)", sum.MaxSkew)
	}
}

// A control-plane component that could not be read because the read was
// forbidden is UNKNOWN, so --fail-on=warning catches it; one a managed
// control plane does not show stays INFO.
func TestForbiddenControllerIsUnknown(t *testing.T) {
	inv := Inventory{Server: ServerVersion{GitVersion: "v1.37.2"}, Components: []Component{
		{Name: KindControllerManager, State: StateForbidden, Source: "pods kube-system component=kube-controller-manager"},
		{Name: KindScheduler, State: StateNotVisible, Source: "no pod in kube-system labelled component=kube-scheduler"},
		{Name: KindAPIServer, State: StateForbidden, Source: "pods kube-system component=kube-apiserver"},
	}, Pools: []Pool{pool("train", "v1.37.2")}}
	fs, _ := Check(inv)
	v := verdicts(fs)
	if got := v[KindControllerManager+"  "+RuleInventory]; got != StatusUnknown {
		t.Errorf("forbidden controller-manager: %q, want unknown", got)
	}
	if got := v[KindAPIServer+"  "+RuleInventory]; got != StatusUnknown {
		t.Errorf("forbidden apiserver instances: %q, want unknown", got)
	}
	if got := v[KindScheduler+"  "+RuleInventory]; got != StatusInfo {
		t.Errorf("scheduler not shown by a managed control plane: %q, want info", got)
	}
}

// Minors older than the calendar's first release are past end of life,
// not of unknown support. Release dates: kubernetes.io/releases and the
// release calendar data in kubernetes/website data/releases/eol.yaml
// (1.25 ended 2023-10-28, 1.26 ended 2024-02-28).
func TestSupportOlderThanCalendar(t *testing.T) {
	c := DefaultCalendar()
	for _, v := range []string{"v1.25.16", "v1.26.15", "v1.20.0"} {
		s := c.Support(MustParseVersion(v), day("2026-12-02"))
		if s.Status != StatusViolation || !strings.Contains(s.Message, "past end of life") {
			t.Errorf("%s: %+v, want a violation past end of life", v, s)
		}
	}
	// With a calendar whose first minor is still supported, an older minor
	// cannot be placed: unknown.
	young, err := ParseCalendar([]byte("dataDate: 2027-01-01\nreleases:\n- {minor: '1.38', released: 2026-12-16, endOfLife: 2028-02-28}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s := young.Support(MustParseVersion("v1.37.0"), day("2027-01-01")); s.Status != StatusUnknown {
		t.Errorf("1.37 before a calendar starting at a supported 1.38: %+v", s)
	}
}
