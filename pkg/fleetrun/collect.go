package fleetrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// ringed are the clusters some ring selects, in file order.
func ringed(f *fleetfile.Fleet) []fleetfile.Cluster {
	var out []fleetfile.Cluster
	for _, c := range f.Spec.Clusters {
		for _, r := range f.Spec.Rings {
			sel := r.Selector
			if fleetfile.Selects(&sel, c.Labels) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// ClusterError is a cluster planning could not read.
type ClusterError struct {
	Cluster string
	Err     error
}

func (e *ClusterError) Error() string { return "cluster " + e.Cluster + ": " + e.Err.Error() }
func (e *ClusterError) Unwrap() error { return e.Err }

// Collect reads every cluster a ring selects, parallel at a time: its
// version inventory (pkg/skew's Collector, what `kubectl skew` reads) and
// its allocatable GPUs (the file's gpus when set). Clusters that cannot be
// read are returned as errors, the others as infos.
func Collect(ctx context.Context, f *fleetfile.Fleet, a *Access, parallel int) (map[string]ClusterInfo, []*ClusterError) {
	cs := ringed(f)
	infos := map[string]ClusterInfo{}
	var (
		mu   sync.Mutex
		errs []*ClusterError
		wg   sync.WaitGroup
	)
	sem := make(chan struct{}, max(1, parallel))
	for _, c := range cs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			in, err := collectOne(ctx, a, c, collectBandwidth(f, c.Name))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, &ClusterError{Cluster: c.Name, Err: err})
				return
			}
			infos[c.Name] = in
		}()
	}
	wg.Wait()
	sort.Slice(errs, func(i, j int) bool { return errs[i].Cluster < errs[j].Cluster })
	return infos, errs
}

// collectOptions are the options a cluster's inference pools are planned
// with: the run's own defaults (pkg/inference's DefaultOptions), so that
// the waves and ETA are those the drain step's `gang-drain run
// --inference` runs, at the cluster's bandwidth.
func collectOptions(bw inference.Bandwidth) inference.Options {
	o := inference.DefaultOptions()
	o.Bandwidth = bw
	return o
}

func collectOne(ctx context.Context, a *Access, c fleetfile.Cluster, bw inference.Bandwidth) (ClusterInfo, error) {
	t, err := a.ForCluster(ctx, c.Name, c.ContextName())
	if err != nil {
		return ClusterInfo{}, err
	}
	md, err := cli.Connect(ctx, t.Getter)
	if err != nil {
		return ClusterInfo{}, err
	}
	kc, err := t.Getter.Kube()
	if err != nil {
		return ClusterInfo{}, cli.UsageErr(err)
	}
	// The plan drains a GPU pool of model Deployments behind budgets as
	// an inference pool, its ETA planned at the cluster's bandwidth.
	col := &pkgskew.Collector{Client: kc, Inference: true, InferenceOptions: collectOptions(bw)}
	if dyn, err := t.Getter.Dynamic(); err == nil {
		col.Dynamic = dyn
	}
	inv, err := col.Collect(ctx)
	if err != nil {
		return ClusterInfo{}, cli.ClassifyClusterErr(err, md, "reading the version inventory")
	}
	in := ClusterInfo{Inventory: inv}
	if c.GPUs != nil {
		in.GPUs = *c.GPUs
	} else {
		n, err := CountNodes(ctx, kc)
		if err != nil {
			return ClusterInfo{}, cli.ClassifyClusterErr(err, md, "counting GPUs")
		}
		in.GPUs = n.GPUs
	}
	return in, nil
}

// LoadSaved reads each ringed cluster's inventory from DIR/<cluster>.yaml
// (or .json): a report saved with `kubectl skew -o yaml`, as `kubectl skew
// plan --from-file` reads one. GPUs come from the file's gpus.
func LoadSaved(f *fleetfile.Fleet, dir string) (map[string]ClusterInfo, []*ClusterError) {
	infos := map[string]ClusterInfo{}
	var errs []*ClusterError
	for _, c := range ringed(f) {
		var data []byte
		var err error
		for _, ext := range []string{".yaml", ".yml", ".json"} {
			data, err = os.ReadFile(filepath.Join(dir, c.Name+ext))
			if err == nil {
				break
			}
		}
		if err != nil {
			errs = append(errs, &ClusterError{Cluster: c.Name, Err: cli.UsageErr(fmt.Errorf("no saved report %s.yaml in %s (save one with kubectl skew --context %s -o yaml)", c.Name, dir, c.ContextName()))})
			continue
		}
		var rep struct {
			Inventory *pkgskew.Inventory `json:"inventory"`
		}
		if err := yaml.Unmarshal(data, &rep); err != nil || rep.Inventory == nil {
			if err == nil {
				err = errors.New("no inventory in it: save it with kubectl skew -o yaml")
			}
			errs = append(errs, &ClusterError{Cluster: c.Name, Err: cli.UsageErr(fmt.Errorf("%s: %v", strings.TrimSuffix(dir, "/")+"/"+c.Name, err))})
			continue
		}
		in := ClusterInfo{Inventory: *rep.Inventory, Saved: true}
		if c.GPUs != nil {
			in.GPUs = *c.GPUs
		}
		infos[c.Name] = in
	}
	return infos, errs
}
