package fleetreport

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// Options are the inputs of Run.
type Options struct {
	// Targets are the clusters, in report order.
	Targets []Target
	// Getter reaches the kubeconfig; ForContext gives each target's.
	Getter cli.ClientGetter
	// Collect reads one context's version inventory (with GPU counts).
	Collect func(ctx context.Context, cg cli.ClientGetter) (cli.Metadata, skew.Inventory, error)
	// Parallel bounds how many clusters are read at once.
	Parallel int
	// Calendar is the release calendar with its patch table.
	Calendar skew.Calendar
	// Store holds saved pre-flights; nil reads none.
	Store Store
	// StoreURL names the store in the report.
	StoreURL string
	// Now is the report's clock (default time.Now).
	Now func() time.Time
	// Source and Fleet go in the report's metadata.
	Source, Fleet string
}

// Run reads every target and returns the report. A target that cannot be
// read is a row with its error; Run itself fails only when ctx ends.
func Run(ctx context.Context, o Options) (*Report, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	at := now().UTC().Truncate(time.Second)
	rep := &Report{APIVersion: cli.ReportAPIVersion(Kind), Kind: Kind, Clusters: make([]Cluster, len(o.Targets)),
		Metadata: Metadata{GeneratedAt: at, Fleet: o.Fleet, Source: o.Source, CalendarDate: o.Calendar.DataDate,
			PatchDataDate: o.Calendar.Patches.DataDate, Store: o.StoreURL}}
	known, kerr := o.Getter.Contexts()
	var names []string
	idx := map[string][]int{}
	for i, t := range o.Targets {
		c := &rep.Clusters[i]
		c.Name, c.Context, c.Ring, c.Labels = t.Name, t.Context, t.Ring, t.Labels
		switch {
		case kerr != nil:
			c.Error, c.ExitCode = fmt.Sprintf("reading kubeconfig: %v", kerr), cli.ExitUsage
		case !slices.Contains(known, t.Context):
			c.Error, c.ExitCode = fmt.Sprintf("context %q is not in the kubeconfig (kubectl config get-contexts -o name)", t.Context), cli.ExitUsage
		default:
			if len(idx[t.Context]) == 0 {
				names = append(names, t.Context)
			}
			idx[t.Context] = append(idx[t.Context], i)
		}
	}
	type read struct {
		md  cli.Metadata
		inv skew.Inventory
	}
	results := cli.FanOutReachable(ctx, o.Getter, names, o.Parallel, func(ctx context.Context, name string) (read, error) {
		md, inv, err := o.Collect(ctx, o.Getter.ForContext(name))
		return read{md, inv}, err
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, r := range results {
		for _, i := range idx[r.Context] {
			c := &rep.Clusters[i]
			c.Server = o.Getter.ForContext(r.Context).Metadata().Server
			if r.Err != nil {
				c.Error, c.ExitCode = errLine(r.Err), cli.ExitCode(r.Err)
				continue
			}
			fill(c, o.Targets[i], r.Value.md, r.Value.inv, o.Calendar, at)
		}
	}
	if o.Store != nil {
		readPreflights(ctx, o.Store, o.StoreURL, rep, o.Parallel, at)
	}
	summarise(rep)
	return rep, nil
}

// errLine is an error on one line, with its hint when it has one.
func errLine(err error) string {
	var ee *cli.ExitError
	if errors.As(err, &ee) && ee.Hint != "" {
		return fmt.Sprintf("%v (try: %s)", err, ee.Hint)
	}
	return err.Error()
}

// fill turns an inventory into the row.
func fill(c *Cluster, t Target, md cli.Metadata, inv skew.Inventory, cal skew.Calendar, now time.Time) {
	if md.Server != "" {
		c.Server = md.Server
	}
	at := inv.CollectedAt
	c.CollectedAt = &at
	c.Notes = inv.Notes
	if t.Provider != "" {
		if p, err := skew.ParseProvider(t.Provider); err == nil {
			c.Provider, c.ProviderSource = string(p), "fleet file"
		}
	}
	if c.Provider == "" {
		d := skew.DetectProvider(inv)
		c.Provider, c.ProviderSource = string(d.Provider), d.Source
	}
	_, sum := skew.Check(inv)
	c.MaxSkew, c.SkewStatus, c.PoolsAtEdge, c.Nodes = sum.MaxSkew, sum.Status, sum.PoolsAtEdge, sum.Nodes
	if oldest, newest, ok := inv.APIServerVersions(); ok {
		c.Version = oldest.String()
		if newest.Compare(oldest) != 0 {
			c.VersionNewest = newest.String()
		}
		p := cal.PatchLag(oldest, now)
		s := cal.SupportOn(oldest, skew.Provider(c.Provider), now)
		c.Patch, c.Support = &p, &s
	}
	for _, p := range inv.Pools {
		pl := Pool{Name: p.Name, Nodes: p.Nodes, Kubelets: p.Versions, UnknownKubelets: p.Unknown, GPUs: p.GPUs,
			AtEdge: slices.Contains(sum.PoolsAtEdge, p.Name)}
		for _, g := range p.GPUs {
			c.GPUs += g.Allocatable
		}
		c.Pools = append(c.Pools, pl)
	}
}

func summarise(rep *Report) {
	s := Summary{Clusters: len(rep.Clusters), Versions: map[string]int{}}
	for _, c := range rep.Clusters {
		if c.Error != "" {
			s.Errors++
			continue
		}
		s.Reachable++
		s.GPUs += c.GPUs
		if c.Support != nil && c.Support.Status == skew.StatusViolation {
			s.OutOfSupport++
		}
		if c.Patch != nil && c.Patch.PatchesBehind > 0 {
			s.BehindPatch++
		}
		if v, err := skew.ParseVersion(c.Version); err == nil {
			s.Versions[v.MinorString()]++
		}
	}
	if len(s.Versions) == 0 {
		s.Versions = nil
	}
	rep.Summary = s
}
