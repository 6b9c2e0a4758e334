package skew

import (
	_ "embed"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

//go:embed calendar.json
var embeddedCalendar []byte

// WarnDays is how close to end of life a minor is at the edge.
const WarnDays = 60

const dateLayout = "2006-01-02"

// Calendar is the release calendar: when each minor was released and when
// its patch support ends, and the date the data itself was taken.
type Calendar struct {
	// DataDate is when the data was last checked (YYYY-MM-DD).
	DataDate string `json:"dataDate"`
	// Source says where it came from.
	Source string `json:"source,omitempty"`
	// Releases, one per minor.
	Releases []Release `json:"releases"`
	// Patches is the newest patch of each minor: a data file of its own
	// (patches.json, --patches), the embedded one unless WithPatches
	// replaces it.
	Patches PatchTable `json:"-"`
	// Providers is the managed providers' own support windows: a data
	// file of its own (providers.json, --provider-calendar), the
	// embedded one unless WithProviders replaces it.
	Providers ProviderCalendar `json:"-"`
}

// Release is one minor's support window.
type Release struct {
	// Minor is MAJOR.MINOR ("1.37").
	Minor string `json:"minor"`
	// Released is the release date (YYYY-MM-DD).
	Released string `json:"released"`
	// EndOfLife is the end of patch support (YYYY-MM-DD).
	EndOfLife string `json:"endOfLife"`

	minor     Version
	released  time.Time
	endOfLife time.Time
}

// DefaultCalendar returns the embedded calendar (1.28 to 1.37).
func DefaultCalendar() Calendar {
	c, err := ParseCalendar(embeddedCalendar)
	if err != nil {
		return Calendar{}
	}
	return c
}

// ParseCalendar reads a calendar in JSON or YAML and checks it. It
// carries the embedded patch table until WithPatches replaces it.
func ParseCalendar(data []byte) (Calendar, error) {
	c := Calendar{Patches: DefaultPatches(), Providers: DefaultProviderCalendar()}
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		// sigs.k8s.io/yaml's text ("error unmarshaling JSON: while decoding
		// JSON: json: unknown field ...") says nothing of what the file
		// should be.
		msg := err.Error()
		if i := strings.LastIndex(msg, "json: "); i >= 0 {
			msg = msg[i+len("json: "):]
		}
		return Calendar{}, fmt.Errorf("not a release calendar (%s): print one with kubectl skew calendar -o yaml", msg)
	}
	if _, err := time.Parse(dateLayout, c.DataDate); err != nil {
		return Calendar{}, fmt.Errorf("calendar: dataDate %q: want YYYY-MM-DD", c.DataDate)
	}
	if len(c.Releases) == 0 {
		return Calendar{}, fmt.Errorf("calendar: no releases")
	}
	seen := map[string]bool{}
	for i := range c.Releases {
		r := &c.Releases[i]
		v, err := ParseVersion(r.Minor)
		if err != nil {
			return Calendar{}, fmt.Errorf("calendar: release %d: %w", i, err)
		}
		r.minor = v.MinorOnly()
		if seen[r.minor.MinorString()] {
			return Calendar{}, fmt.Errorf("calendar: minor %s listed twice", r.minor.MinorString())
		}
		seen[r.minor.MinorString()] = true
		if r.released, err = time.Parse(dateLayout, r.Released); err != nil {
			return Calendar{}, fmt.Errorf("calendar: %s released %q: want YYYY-MM-DD", r.Minor, r.Released)
		}
		if r.endOfLife, err = time.Parse(dateLayout, r.EndOfLife); err != nil {
			return Calendar{}, fmt.Errorf("calendar: %s endOfLife %q: want YYYY-MM-DD", r.Minor, r.EndOfLife)
		}
		if !r.endOfLife.After(r.released) {
			return Calendar{}, fmt.Errorf("calendar: %s ends before it is released", r.Minor)
		}
	}
	sort.Slice(c.Releases, func(i, j int) bool { return c.Releases[i].minor.MinorsAfter(c.Releases[j].minor) < 0 })
	return c, nil
}

// Lookup returns the release of a minor.
func (c Calendar) Lookup(v Version) (Release, bool) {
	for _, r := range c.Releases {
		if r.minor.MinorsAfter(v) == 0 {
			return r, true
		}
	}
	return Release{}, false
}

// Newest returns the newest minor released on or before now.
func (c Calendar) Newest(now time.Time) (Version, bool) {
	var best Version
	ok := false
	for _, r := range c.Releases {
		if !r.released.After(now) && (!ok || r.minor.MinorsAfter(best) > 0) {
			best, ok = r.minor, true
		}
	}
	return best, ok
}

// Support is the support window of one version at one moment.
type Support struct {
	// Minor is MAJOR.MINOR.
	Minor string `json:"minor"`
	// Released and EndOfLife come from the calendar.
	Released  string `json:"released,omitempty"`
	EndOfLife string `json:"endOfLife,omitempty"`
	// DaysToEndOfLife is negative after end of life; nil when unknown.
	DaysToEndOfLife *int `json:"daysToEndOfLife,omitempty"`
	// Newest is the newest minor released by now, per the calendar.
	Newest string `json:"newest,omitempty"`
	// MinorsBehind is how many minors behind Newest.
	MinorsBehind int `json:"minorsBehind"`
	// CalendarDate is the data's own date.
	CalendarDate string `json:"calendarDate"`
	// Status: ok; edge inside the last WarnDays days; violation after end
	// of life; unknown when the calendar does not know the minor.
	Status Status `json:"status"`
	// Message explains the status.
	Message string `json:"message"`
	// Provider is whose window applies (SupportOn); Window is upstream,
	// standard or extended.
	Provider string `json:"provider,omitempty"`
	Window   string `json:"window,omitempty"`
	// EndOfStandardSupport and EndOfExtendedSupport are the provider's
	// dates (YYYY-MM-DD, or YYYY-MM where the vendor gives a month).
	EndOfStandardSupport string `json:"endOfStandardSupport,omitempty"`
	EndOfExtendedSupport string `json:"endOfExtendedSupport,omitempty"`
	// SupportEnds is when the window that applies ends, and
	// DaysToSupportEnd how far away that is (negative after).
	SupportEnds      string `json:"supportEnds,omitempty"`
	DaysToSupportEnd *int   `json:"daysToSupportEnd,omitempty"`
	// Source is the provider page the dates come from.
	Source string `json:"source,omitempty"`
	// Note says why the upstream date applies to a managed provider.
	Note string `json:"note,omitempty"`
}

// Support returns v's support window at now.
func (c Calendar) Support(v Version, now time.Time) Support {
	s := Support{Minor: v.MinorString(), CalendarDate: c.DataDate}
	if n, ok := c.Newest(now); ok {
		s.Newest = n.MinorString()
		if b := n.MinorsAfter(v); b > 0 {
			s.MinorsBehind = b
		}
	}
	r, ok := c.Lookup(v)
	if !ok {
		s.Status = StatusUnknown
		if len(c.Releases) > 0 && v.MinorsAfter(c.Releases[len(c.Releases)-1].minor) > 0 {
			s.Message = fmt.Sprintf("%s is newer than the release calendar (data from %s); its support window is unknown: pass --calendar with newer data", v.MinorString(), c.DataDate)
		} else if first, ok := c.first(); ok && v.MinorsAfter(first.minor) < 0 && truncDay(now).After(first.endOfLife) {
			// Upstream patches the three newest minors, and each minor's
			// end of life comes after the one before it
			// (https://kubernetes.io/releases/ "maintains release branches
			// for the most recent three minor releases"; the dates are in
			// kubernetes/website data/releases/eol.yaml and
			// https://kubernetes.io/releases/patch-releases/#non-active-branch-history:
			// 1.25 ended in October 2023, 1.26 in February 2024). So a
			// minor older than the calendar's first one ended no later
			// than that one did.
			s.Status = StatusViolation
			s.Message = fmt.Sprintf("%s is past end of life: it is older than %s, the calendar's first minor, which reached end of life on %s", v.MinorString(), first.minor.MinorString(), first.EndOfLife)
		} else {
			s.Message = fmt.Sprintf("%s is not in the release calendar (data from %s)", v.MinorString(), c.DataDate)
		}
		return s
	}
	s.Released, s.EndOfLife = r.Released, r.EndOfLife
	days := int(r.endOfLife.Sub(truncDay(now)).Hours() / 24)
	s.DaysToEndOfLife = &days
	switch {
	case days < 0:
		s.Status = StatusViolation
		s.Message = fmt.Sprintf("%s reached end of life on %s (%d days ago): no more patches", s.Minor, r.EndOfLife, -days)
	case days <= WarnDays:
		s.Status = StatusEdge
		s.Message = fmt.Sprintf("%s reaches end of life on %s, in %d days", s.Minor, r.EndOfLife, days)
	default:
		s.Status = StatusOK
		s.Message = fmt.Sprintf("supported until %s (%d days)", r.EndOfLife, days)
	}
	if s.MinorsBehind > 0 {
		s.Message += fmt.Sprintf("; %s behind %s", Minors(s.MinorsBehind), s.Newest)
	}
	return s
}

// first returns the calendar's oldest release.
func (c Calendar) first() (Release, bool) {
	if len(c.Releases) == 0 {
		return Release{}, false
	}
	return c.Releases[0], true
}

func truncDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// FleetPolicy is the rule "every cluster at N or N-K of the newest
// supported minor"; "n-1" means Lag 1.
type FleetPolicy struct {
	Lag int
}

// ParseFleetPolicy reads "n", "n-1", "n-2" ...
func ParseFleetPolicy(s string) (FleetPolicy, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "n" {
		return FleetPolicy{}, nil
	}
	if rest, ok := strings.CutPrefix(t, "n-"); ok {
		if k, err := strconv.Atoi(rest); err == nil && k >= 0 && k < 100 {
			return FleetPolicy{Lag: k}, nil
		}
	}
	return FleetPolicy{}, fmt.Errorf("policy %q: want n or n-K, such as n-1", s)
}

// String prints the policy as n-K.
func (p FleetPolicy) String() string {
	if p.Lag == 0 {
		return "n"
	}
	return fmt.Sprintf("n-%d", p.Lag)
}

// Check applies the policy to an apiserver version: newest is the newest
// supported minor.
func (p FleetPolicy) Check(v, newest Version) Finding {
	behind := newest.MinorsAfter(v)
	f := Finding{Component: KindAPIServer, Instance: "policy " + p.String(), Version: v.String(), Against: newest.MinorString(),
		Skew: behind, Limit: p.Lag, Rule: RuleFleetPolicy}
	if behind > p.Lag {
		f.Status = StatusViolation
		f.Message = fmt.Sprintf("the fleet policy %s wants %s or newer; this cluster is %s behind %s", p, newest.AddMinors(-p.Lag).MinorString(), Minors(behind), newest.MinorString())
		return f
	}
	f.Status = StatusOK
	f.Message = fmt.Sprintf("within the fleet policy %s of %s", p, newest.MinorString())
	return f
}
