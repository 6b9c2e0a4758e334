package fleetreport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/preflight"
)

// Store reads objects of a fleet's store (spec.store.url) by key, a
// slash-separated path under the store's root; Read returns an error
// wrapping fs.ErrNotExist when the key has no object. The fleet
// programme's store (fleetrun.OpenStore: file, s3, gs, azblob) is one, so
// the report reads every store the programme writes.
type Store interface {
	Read(ctx context.Context, key string) ([]byte, error)
}

// PreflightKey is where the fleet programme saves a cluster's newest
// `kubectl skew preflight -o json` report.
func PreflightKey(cluster string) string { return "latest/" + cluster + "/preflight.json" }

// savedPreflight is the part of a saved pre-flight report the row shows.
type savedPreflight struct {
	Kind     string `json:"kind"`
	Target   string `json:"target"`
	Evidence struct {
		CollectedAt time.Time `json:"collectedAt"`
	} `json:"evidence"`
	Summary struct {
		// Status reads the words of every release (preflight.Status).
		Status preflight.Status `json:"status"`
	} `json:"summary"`
}

// preflightKind is the kind of `kubectl skew preflight -o json`.
const preflightKind = "SkewPreflightReport"

// readPreflights fills each row's saved pre-flight, parallel at once.
func readPreflights(ctx context.Context, st Store, storeURL string, rep *Report, parallel int, now time.Time) {
	names := make([]string, 0, len(rep.Clusters))
	for _, c := range rep.Clusters {
		names = append(names, c.Name)
	}
	res := cli.FanOut(ctx, names, parallel, func(ctx context.Context, name string) (*Preflight, error) {
		return readPreflight(ctx, st, storeURL, name, now), nil
	})
	for i, r := range res {
		rep.Clusters[i].Preflight = r.Value
	}
}

func readPreflight(ctx context.Context, st Store, storeURL, cluster string, now time.Time) *Preflight {
	key := PreflightKey(cluster)
	p := &Preflight{Source: strings.TrimSuffix(storeURL, "/") + "/" + key}
	data, err := st.Read(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		p.Error = fmt.Sprintf("reading the saved pre-flight: %v", err)
		return p
	}
	var s savedPreflight
	if err := json.Unmarshal(data, &s); err != nil {
		p.Error = fmt.Sprintf("the saved pre-flight is not a kubectl skew preflight -o json report: %v", err)
		return p
	}
	if s.Kind != preflightKind || s.Summary.Status == "" {
		p.Error = fmt.Sprintf("the saved pre-flight has kind %q and no summary.status; want a %s", s.Kind, preflightKind)
		return p
	}
	p.Verdict, p.Target = s.Summary.Status.JSONWord(), s.Target
	if !s.Evidence.CollectedAt.IsZero() {
		at := s.Evidence.CollectedAt.UTC()
		p.CollectedAt = &at
		p.AgeSeconds = int64(max(now.Sub(at), 0) / time.Second)
	}
	return p
}
