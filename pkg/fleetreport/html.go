package fleetreport

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

//go:embed templates/report.html
var pageTemplate string

var page = template.Must(template.New("report").Parse(pageTemplate))

// WriteHTML writes the report as one self-contained page: no scripts, no
// fonts, images or styles fetched; the pictures are inline SVG.
func WriteHTML(w io.Writer, rep *Report) error {
	return page.Execute(w, newView(rep))
}

// view is what the template shows.
type view struct {
	Rep      *Report
	Rows     []row
	Timeline timeline
	Spread   []ringSpread
	Minors   []minorKey
	// SpreadHeight is the spread picture's height.
	SpreadHeight int
}

type row struct {
	Cluster
	Class, PatchText, SupportText, SkewText, PoolsText, GPUText, PreflightText, PreflightClass, VersionText string
}

// timeline is the support window of each cluster's minor on one time axis.
type timeline struct {
	Width, Height int
	Axis          []tick
	NowX          float64
	Rows          []timelineRow
}

type tick struct {
	X     float64
	Label string
}

type timelineRow struct {
	Cluster, Minor, Status, Title string
	Y, X, W                       float64
	Known                         bool
}

type ringSpread struct {
	Ring, Label string
	Total       int
	Y           float64
	Parts       []spreadPart
}

type spreadPart struct {
	Minor, Title string
	Count        int
	X, Y, W      float64
	Color        string
}

type minorKey struct{ Minor, Color string }

const (
	tlLabelW = 180
	tlBarW   = 720
	tlRowH   = 22
	spreadW  = 720
)

func newView(rep *Report) view {
	v := view{Rep: rep}
	for _, c := range rep.Clusters {
		v.Rows = append(v.Rows, newRow(c, rep.Metadata.Store != ""))
	}
	v.Timeline = newTimeline(rep)
	v.Spread, v.Minors = newSpread(rep)
	v.SpreadHeight = 20 + 30*len(v.Spread)
	return v
}

// newRow is a cluster's row; withStore says a store was read for saved
// pre-flights.
func newRow(c Cluster, withStore bool) row {
	r := row{Cluster: c, Class: "ok", PatchText: "-", SupportText: "-", SkewText: "-", PoolsText: "-", GPUText: "-", PreflightText: "-"}
	if withStore {
		r.PreflightText = "none saved"
	}
	if c.Error != "" {
		r.Class = "error"
	} else {
		r.VersionText = c.Version
		if c.VersionNewest != "" {
			r.VersionText += ".." + c.VersionNewest
		}
		if p := c.Patch; p != nil {
			r.PatchText = p.Message
		}
		if s := c.Support; s != nil {
			r.SupportText = s.Message
			switch s.Status {
			case skew.StatusViolation:
				r.Class = "violation"
			case skew.StatusEdge:
				r.Class = "edge"
			}
		}
		r.SkewText = strconv.Itoa(c.MaxSkew)
		if len(c.PoolsAtEdge) > 0 {
			r.SkewText += " (at edge: " + strings.Join(c.PoolsAtEdge, ", ") + ")"
		}
		var pools, gpus []string
		for _, p := range c.Pools {
			var ks []string
			for _, k := range p.Kubelets {
				ks = append(ks, fmt.Sprintf("%s×%d", k.Version, k.Nodes))
			}
			if p.UnknownKubelets > 0 {
				ks = append(ks, fmt.Sprintf("unknown×%d", p.UnknownKubelets))
			}
			pools = append(pools, p.Name+": "+strings.Join(ks, " "))
			for _, g := range p.GPUs {
				what := g.Resource
				if g.Product != "" {
					what += " " + g.Product
				}
				gpus = append(gpus, fmt.Sprintf("%s: %d %s", p.Name, g.Allocatable, what))
			}
		}
		if len(pools) > 0 {
			r.PoolsText = strings.Join(pools, "; ")
		}
		if len(gpus) > 0 {
			r.GPUText = strings.Join(gpus, "; ")
		}
	}
	if p := c.Preflight; p != nil {
		// The class is the verdict's word (ok, warn, unknown, fail); the
		// text its table word, as skew preflight prints it (OK, WARN, ...).
		r.PreflightClass = p.Verdict
		word := strings.ToUpper(p.Verdict)
		switch {
		case p.Error != "":
			r.PreflightText, r.PreflightClass = p.Error, "fail"
		case p.CollectedAt != nil:
			r.PreflightText = fmt.Sprintf("%s for %s, %s old", word, p.Target, age(time.Duration(p.AgeSeconds)*time.Second))
		default:
			r.PreflightText = word + " for " + p.Target
		}
	}
	return r
}

// age writes a duration the way a person reads it: 3d4h, 5h10m, 12m.
func age(d time.Duration) string {
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd%dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	case d >= time.Hour:
		return fmt.Sprintf("%dh%dm", d/time.Hour, d%time.Hour/time.Minute)
	}
	return fmt.Sprintf("%dm", d/time.Minute)
}

func newTimeline(rep *Report) timeline {
	now := rep.Metadata.GeneratedAt
	lo, hi := now.AddDate(0, -6, 0), now.AddDate(0, 6, 0)
	type win struct{ from, to time.Time }
	wins := make([]*win, len(rep.Clusters))
	for i, c := range rep.Clusters {
		if c.Support == nil || c.Support.Released == "" {
			continue
		}
		from, err1 := time.Parse("2006-01-02", c.Support.Released)
		to, err2 := time.Parse("2006-01-02", c.Support.EndOfLife)
		if err1 != nil || err2 != nil {
			continue
		}
		wins[i] = &win{from, to}
		if from.Before(lo) {
			lo = from
		}
		if to.After(hi) {
			hi = to
		}
	}
	lo = time.Date(lo.Year(), lo.Month(), 1, 0, 0, 0, 0, time.UTC)
	hi = time.Date(hi.Year(), hi.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, 1, 0)
	span := hi.Sub(lo).Seconds()
	x := func(t time.Time) float64 { return tlLabelW + float64(tlBarW)*t.Sub(lo).Seconds()/span }
	tl := timeline{Width: tlLabelW + tlBarW + 20, Height: 30 + tlRowH*len(rep.Clusters) + 10, NowX: x(now)}
	for t := lo; !t.After(hi); t = t.AddDate(0, 3, 0) {
		tl.Axis = append(tl.Axis, tick{X: x(t), Label: t.Format("2006-01")})
	}
	for i, c := range rep.Clusters {
		r := timelineRow{Cluster: c.Name, Y: float64(30 + tlRowH*i)}
		if w := wins[i]; w != nil {
			r.Known, r.Minor, r.Status = true, c.Support.Minor, string(c.Support.Status)
			r.X, r.W = x(w.from), max(x(w.to)-x(w.from), 1)
			r.Title = fmt.Sprintf("%s: %s supported %s to %s", c.Name, c.Support.Minor, c.Support.Released, c.Support.EndOfLife)
		} else {
			r.Title = c.Name + ": support window unknown"
			if c.Error != "" {
				r.Title = c.Name + ": not read"
			}
		}
		tl.Rows = append(tl.Rows, r)
	}
	return tl
}

// palette colours minors by how far behind the newest one they are: the
// newest last (blue), older ones towards red.
var palette = []string{"#b2182b", "#d6604d", "#f4a582", "#92c5de", "#4393c3", "#2166ac"}

func newSpread(rep *Report) ([]ringSpread, []minorKey) {
	byRing := map[string]map[string]int{}
	minors := map[string]skew.Version{}
	for _, c := range rep.Clusters {
		minor := "not read"
		if v, err := skew.ParseVersion(c.Version); err == nil {
			minor = v.MinorString()
			minors[minor] = v.MinorOnly()
		}
		if byRing[c.Ring] == nil {
			byRing[c.Ring] = map[string]int{}
		}
		byRing[c.Ring][minor]++
	}
	order := make([]string, 0, len(minors))
	for m := range minors {
		order = append(order, m)
	}
	sort.Slice(order, func(i, j int) bool { return minors[order[i]].MinorsAfter(minors[order[j]]) < 0 })
	order = append(order, "not read")
	colors := map[string]string{"not read": "#888888"}
	var keys []minorKey
	newest := len(order) - 2 // order ends with "not read"
	for i, m := range order {
		if m != "not read" {
			colors[m] = palette[max(len(palette)-1-(newest-i), 0)]
		}
		keys = append(keys, minorKey{m, colors[m]})
	}
	rings := make([]string, 0, len(byRing))
	for r := range byRing {
		rings = append(rings, r)
	}
	sort.Strings(rings)
	var out []ringSpread
	for i, r := range rings {
		s := ringSpread{Ring: r, Label: r, Y: float64(10 + 30*i)}
		if r == "" {
			s.Label = "(no ring)"
		}
		for _, n := range byRing[r] {
			s.Total += n
		}
		x := float64(tlLabelW)
		for _, m := range order {
			n := byRing[r][m]
			if n == 0 {
				continue
			}
			w := float64(spreadW) * float64(n) / float64(s.Total)
			s.Parts = append(s.Parts, spreadPart{Minor: m, Count: n, X: x, Y: s.Y, W: w, Color: colors[m],
				Title: fmt.Sprintf("%s: %d of %d clusters on %s", s.Label, n, s.Total, m)})
			x += w
		}
		out = append(out, s)
	}
	return out, keys
}
