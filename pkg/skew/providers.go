package skew

import (
	_ "embed"
	"fmt"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

//go:embed providers.json
var embeddedProviders []byte

// monthLayout is a vendor date given to the month only ("Jul 2025").
const monthLayout = "2006-01"

// Support windows: whose dates decide a cluster's support.
const (
	// WindowUpstream: the upstream end of life (no provider data).
	WindowUpstream = "upstream"
	// WindowStandard: the provider's standard support.
	WindowStandard = "standard"
	// WindowExtended: the provider's extended support (EKS extended
	// support, GKE Extended channel, AKS LTS).
	WindowExtended = "extended"
)

// ProviderCalendar is the managed providers' support windows per minor:
// EKS, GKE and AKS keep patching a minor after its upstream end of life.
type ProviderCalendar struct {
	// DataDate is when the data was last checked (YYYY-MM-DD).
	DataDate string `json:"dataDate"`
	// Providers, one entry per provider.
	Providers []ProviderWindows `json:"providers"`
}

// ProviderWindows is one provider's published calendar.
type ProviderWindows struct {
	// Provider is eks, gke or aks (as --provider takes it).
	Provider Provider `json:"provider"`
	// Source is the vendor page the dates come from.
	Source string `json:"source"`
	// Checked is when the page was read (YYYY-MM-DD).
	Checked string `json:"checked"`
	// StandardName and ExtendedName are the vendor's words for the two
	// windows ("standard support", "LTS").
	StandardName string `json:"standardName"`
	ExtendedName string `json:"extendedName"`
	// Notes say what the dates mean and where the vendor contradicts
	// itself.
	Notes []string `json:"notes,omitempty"`
	// Releases, one per sourced minor; a minor not listed falls back to
	// the upstream calendar.
	Releases []ProviderRelease `json:"releases"`
	// NodeSkew is how far the provider lets node pools lag its control
	// plane, when it says; absent, the upstream kubelet skew applies.
	NodeSkew *NodeSkew `json:"nodeSkew,omitempty"`
}

// NodeSkew is a provider's limit on how many minors a node pool may be
// behind the control plane, with where it is stated.
type NodeSkew struct {
	// MaxMinorsBehind is the most minors a pool may lag (1 to 3); the
	// upstream limit still applies where it is lower.
	MaxMinorsBehind int `json:"maxMinorsBehind"`
	// Source is the page (at a revision where it has one) that states it.
	Source string `json:"source"`
	// Quote is the sentence read there.
	Quote string `json:"quote"`
	// Checked is when it was read (YYYY-MM-DD).
	Checked string `json:"checked"`
	// Notes say where the vendor contradicts itself and which statement
	// is kept.
	Notes []string `json:"notes,omitempty"`
}

// ProviderRelease is one minor's windows at one provider. A date is
// YYYY-MM-DD, or YYYY-MM where the vendor gives the month only (taken as
// the first day of that month, the earliest the window can end).
type ProviderRelease struct {
	Minor                string `json:"minor"`
	EndOfStandardSupport string `json:"endOfStandardSupport"`
	EndOfExtendedSupport string `json:"endOfExtendedSupport,omitempty"`

	minor            Version
	standard, extend time.Time
}

// DefaultProviderCalendar returns the embedded provider calendar.
func DefaultProviderCalendar() ProviderCalendar {
	c, err := ParseProviderCalendar(embeddedProviders)
	if err != nil {
		return ProviderCalendar{}
	}
	return c
}

func parseVendorDate(s string) (time.Time, error) {
	if t, err := time.Parse(dateLayout, s); err == nil {
		return t, nil
	}
	return time.Parse(monthLayout, s)
}

// ParseProviderCalendar reads a provider calendar in JSON or YAML and
// checks it.
func ParseProviderCalendar(data []byte) (ProviderCalendar, error) {
	var c ProviderCalendar
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return ProviderCalendar{}, fmt.Errorf("provider calendar: %w", err)
	}
	if _, err := time.Parse(dateLayout, c.DataDate); err != nil {
		return ProviderCalendar{}, fmt.Errorf("provider calendar: dataDate %q: want YYYY-MM-DD", c.DataDate)
	}
	seenP := map[Provider]bool{}
	for i := range c.Providers {
		p := &c.Providers[i]
		if p.Provider != ProviderEKS && p.Provider != ProviderGKE && p.Provider != ProviderAKS {
			return ProviderCalendar{}, fmt.Errorf("provider calendar: provider %q: want eks, gke or aks", p.Provider)
		}
		if seenP[p.Provider] {
			return ProviderCalendar{}, fmt.Errorf("provider calendar: %s listed twice", p.Provider)
		}
		seenP[p.Provider] = true
		if strings.TrimSpace(p.Source) == "" {
			return ProviderCalendar{}, fmt.Errorf("provider calendar: %s has no source", p.Provider)
		}
		seen := map[string]bool{}
		for j := range p.Releases {
			r := &p.Releases[j]
			v, err := ParseVersion(r.Minor)
			if err != nil {
				return ProviderCalendar{}, fmt.Errorf("provider calendar: %s release %d: %w", p.Provider, j, err)
			}
			r.minor = v.MinorOnly()
			if seen[r.minor.MinorString()] {
				return ProviderCalendar{}, fmt.Errorf("provider calendar: %s %s listed twice", p.Provider, r.minor.MinorString())
			}
			seen[r.minor.MinorString()] = true
			if r.standard, err = parseVendorDate(r.EndOfStandardSupport); err != nil {
				return ProviderCalendar{}, fmt.Errorf("provider calendar: %s %s endOfStandardSupport %q: want YYYY-MM-DD or YYYY-MM", p.Provider, r.Minor, r.EndOfStandardSupport)
			}
			if r.EndOfExtendedSupport != "" {
				if r.extend, err = parseVendorDate(r.EndOfExtendedSupport); err != nil {
					return ProviderCalendar{}, fmt.Errorf("provider calendar: %s %s endOfExtendedSupport %q: want YYYY-MM-DD or YYYY-MM", p.Provider, r.Minor, r.EndOfExtendedSupport)
				}
				if !r.extend.After(r.standard) {
					return ProviderCalendar{}, fmt.Errorf("provider calendar: %s %s: extended support ends before standard support", p.Provider, r.Minor)
				}
			}
		}
		sort.Slice(p.Releases, func(a, b int) bool { return p.Releases[a].minor.MinorsAfter(p.Releases[b].minor) < 0 })
		if ns := p.NodeSkew; ns != nil {
			if ns.MaxMinorsBehind < 1 || ns.MaxMinorsBehind > 3 {
				return ProviderCalendar{}, fmt.Errorf("provider calendar: %s nodeSkew.maxMinorsBehind %d: want 1 to 3", p.Provider, ns.MaxMinorsBehind)
			}
			if strings.TrimSpace(ns.Source) == "" || strings.TrimSpace(ns.Quote) == "" {
				return ProviderCalendar{}, fmt.Errorf("provider calendar: %s nodeSkew has no source or quote", p.Provider)
			}
			if _, err := time.Parse(dateLayout, ns.Checked); err != nil {
				return ProviderCalendar{}, fmt.Errorf("provider calendar: %s nodeSkew.checked %q: want YYYY-MM-DD", p.Provider, ns.Checked)
			}
		}
	}
	return c, nil
}

// NodeSkewOf returns the provider's node skew limit, or nil when the data
// states none.
func (pc *ProviderCalendar) NodeSkewOf(p Provider) *NodeSkew {
	if pc == nil {
		return nil
	}
	for _, w := range pc.Providers {
		if w.Provider == p {
			return w.NodeSkew
		}
	}
	return nil
}

// NodeSkewLimit is how many minors a pool whose kubelet is at v may lag
// the control plane on provider p: the upstream kubelet skew
// (KubeletMaxSkew), or the provider's own limit where it is lower.
func (pc *ProviderCalendar) NodeSkewLimit(p Provider, v Version) int {
	lim := KubeletMaxSkew(v)
	if ns := pc.NodeSkewOf(p); ns != nil && ns.MaxMinorsBehind < lim {
		lim = ns.MaxMinorsBehind
	}
	return lim
}

// lookup returns a provider's entry and its row for a minor.
func (pc ProviderCalendar) lookup(p Provider, v Version) (ProviderWindows, ProviderRelease, bool, bool) {
	for _, w := range pc.Providers {
		if w.Provider != p {
			continue
		}
		for _, r := range w.Releases {
			if r.minor.MinorsAfter(v) == 0 {
				return w, r, true, true
			}
		}
		return w, ProviderRelease{}, true, false
	}
	return ProviderWindows{}, ProviderRelease{}, false, false
}

// WithProviders returns the calendar with another provider table.
func (c Calendar) WithProviders(p ProviderCalendar) Calendar {
	c.Providers = p
	return c
}

// SupportOn is v's support window at now on a provider: the provider's
// own windows where the provider calendar has the minor, else the
// upstream end of life (Support) with a note saying so. Past standard
// support but inside extended support is edge (a warning): patched, at a
// cost or on an opt-in plan, with an end date.
func (c Calendar) SupportOn(v Version, p Provider, now time.Time) Support {
	s := c.Support(v, now)
	s.Provider, s.Window = string(ProviderUnknown), WindowUpstream
	if p != "" {
		s.Provider = string(p)
	}
	if s.EndOfLife != "" {
		s.SupportEnds, s.DaysToSupportEnd = s.EndOfLife, s.DaysToEndOfLife
	}
	w, r, known, ok := c.Providers.lookup(p, v)
	if !known {
		return s
	}
	s.Source = w.Source
	if !ok {
		s.Note = fmt.Sprintf("the %s calendar (%s) has no dates for %s: the upstream end of life applies", p.Title(), w.Checked, v.MinorString())
		return s
	}
	s.EndOfStandardSupport, s.EndOfExtendedSupport = r.EndOfStandardSupport, r.EndOfExtendedSupport
	s.Window = WindowStandard
	today := truncDay(now)
	daysTo := func(t time.Time) int { return int(t.Sub(today).Hours() / 24) }
	std := daysTo(r.standard)
	end, endDate, endName := std, r.EndOfStandardSupport, w.StandardName
	if !r.extend.IsZero() && std < 0 {
		s.Window = WindowExtended
		end, endDate, endName = daysTo(r.extend), r.EndOfExtendedSupport, w.ExtendedName
	}
	s.SupportEnds, s.DaysToSupportEnd = endDate, &end
	upstream := ""
	if s.DaysToEndOfLife != nil && *s.DaysToEndOfLife < 0 {
		upstream = fmt.Sprintf(" (upstream end of life %s)", s.EndOfLife)
	}
	switch {
	case end < 0:
		s.Status = StatusViolation
		s.Message = fmt.Sprintf("%s %s ended on %s (%d days ago)%s: no more patches", p.Title(), endName, endDate, -end, upstream)
	case s.Window == WindowExtended:
		s.Status = StatusEdge
		s.Message = fmt.Sprintf("%s until %s (%d days); %s %s ended on %s%s", endName, endDate, end, p.Title(), w.StandardName, r.EndOfStandardSupport, upstream)
	case end <= WarnDays:
		s.Status = StatusEdge
		s.Message = fmt.Sprintf("%s %s ends on %s, in %d days", p.Title(), endName, endDate, end)
	default:
		s.Status = StatusOK
		s.Message = fmt.Sprintf("%s %s until %s (%d days)", p.Title(), endName, endDate, end)
	}
	if s.Window == WindowStandard && r.EndOfExtendedSupport != "" {
		s.Message += fmt.Sprintf("; %s until %s", w.ExtendedName, r.EndOfExtendedSupport)
	}
	if s.MinorsBehind > 0 {
		s.Message += fmt.Sprintf("; %s behind %s", Minors(s.MinorsBehind), s.Newest)
	}
	return s
}
