package fleetfile

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
)

// cronParser reads the standard five fields (minute hour day-of-month month
// day-of-week) and the descriptors (@daily), as robfig/cron's
// ParseStandard does; the time zone comes from the window's timeZone field,
// not from a CRON_TZ= prefix, so that one place says where a window lives.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Location is the window's time zone (UTC when unset). Load checks the
// name, so a loaded file never fails here.
func (w Window) Location() *time.Location {
	if w.TimeZone == "" {
		return time.UTC
	}
	loc, err := time.LoadLocation(w.TimeZone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// parseSchedule reads the cron expression in the window's zone.
func (w Window) parseSchedule() (cron.Schedule, error) {
	s, err := cronParser.Parse(w.Schedule)
	if err != nil {
		return nil, err
	}
	if spec, ok := s.(*cron.SpecSchedule); ok {
		spec.Location = w.Location()
	}
	return s, nil
}

// Opening is one opening of a window: from Start to End.
type Opening struct {
	Start time.Time
	End   time.Time
}

// Usable is the part of an opening in which a step of length step may
// still start: the window minus the finish margin and the step.
func (o Opening) Usable(step, margin time.Duration) (latestStart time.Time, ok bool) {
	ls := o.End.Add(-margin - step)
	return ls, !ls.Before(o.Start)
}

// OpenAt returns the opening that contains t, if any. Openings that
// overlap (a schedule that fires again before the window closes) merge
// into one: the window stays open until the last of them ends.
func (w Window) OpenAt(t time.Time) (Opening, bool) {
	s, err := w.parseSchedule()
	if err != nil {
		return Opening{}, false
	}
	d := w.Duration.Value()
	if d <= 0 {
		return Opening{}, false
	}
	// An opening that contains t started in (t-d, t]. Next is strictly
	// after its argument, so start one second earlier.
	first := s.Next(t.Add(-d).Add(-time.Second).Truncate(time.Second))
	if first.IsZero() || first.After(t) || !first.Add(d).After(t) {
		return Opening{}, false
	}
	o := Opening{Start: first, End: first.Add(d)}
	// Extend across later firings that begin before the opening ends.
	for next := s.Next(first); !next.IsZero() && !next.After(o.End); next = s.Next(next) {
		if e := next.Add(d); e.After(o.End) {
			o.End = e
		}
	}
	return o, true
}

// NextOpening returns the first opening whose usable part (room for a step
// of length step before the finish margin) is at or after t: the current
// one when a step may still start in it. It gives up after a year of
// firings, which Lint reports as a window that never fits a step.
func (w Window) NextOpening(t time.Time, step time.Duration) (Opening, bool) {
	margin := w.FinishMargin.Value()
	if o, ok := w.OpenAt(t); ok {
		if ls, fits := o.Usable(step, margin); fits && !ls.Before(t) {
			return o, true
		}
	}
	s, err := w.parseSchedule()
	if err != nil {
		return Opening{}, false
	}
	d := w.Duration.Value()
	limit := t.AddDate(1, 0, 1)
	for next := s.Next(t); !next.IsZero() && next.Before(limit); next = s.Next(next) {
		o, ok := w.OpenAt(next)
		if !ok {
			o = Opening{Start: next, End: next.Add(d)}
		}
		if _, fits := o.Usable(step, margin); fits {
			return o, true
		}
	}
	return Opening{}, false
}

// Selects reports whether sel (nil or empty: every cluster) selects the
// labels.
func Selects(sel *metav1.LabelSelector, ls map[string]string) bool {
	if sel == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	return s.Matches(k8slabels.Set(ls))
}

// Span is a freeze's start and end instants; a date end is inclusive, so
// it ends at the next midnight UTC.
func (f Freeze) Span() (start, end time.Time) {
	start, _ = ParseInstant(f.Start)
	end, _ = ParseInstant(f.End)
	if _, err := time.Parse("2006-01-02", f.End); err == nil {
		end = end.AddDate(0, 0, 1)
	}
	return start, end
}

// Holds reports whether the freeze holds at t.
func (f Freeze) Holds(t time.Time) bool {
	s, e := f.Span()
	return !t.Before(s) && t.Before(e)
}

// Describe is how plan and gate name the freeze.
func (f Freeze) Describe() string {
	s := fmt.Sprintf("freeze %s to %s", f.Start, f.End)
	if f.Reason != "" {
		s += " (" + strings.TrimSpace(f.Reason) + ")"
	}
	return s
}
