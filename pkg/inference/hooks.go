package inference

import (
	"fmt"
	"strconv"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// Detection says whether a pool is an inference pool.
type Detection struct {
	// Inference is true for a pool that holds model Deployments (pods
	// asking for GPUs) behind PodDisruptionBudgets and no training gang.
	Inference bool `json:"inference"`
	Models    int  `json:"models"`
	WithPDB   int  `json:"withPDB"`
	Gangs     int  `json:"gangs"`
	// Reason says why, in words.
	Reason string `json:"reason"`
}

// Detect classifies a pool read by Reader.Read (with a Discoverer, so that
// gangs are seen), for a caller that chooses per GPU pool between
// `kubectl gang-drain run --inference` (RunArgs) and the gang drain and
// adds Plan.ETA to the pool step's expected duration: the runbook's
// collection (pkg/skew, Collector.Inference) and through it the fleet
// programme's plan.
func Detect(pool *Pool) Detection {
	d := Detection{Models: len(pool.Models), Gangs: len(pool.Gangs)}
	for _, m := range pool.Models {
		if m.PDB != "" {
			d.WithPDB++
		}
	}
	switch {
	case d.Gangs > 0:
		d.Reason = fmt.Sprintf("%s on the pool: the gang drain", cli.Plural(d.Gangs, "training gang"))
	case d.Models == 0:
		d.Reason = "no model Deployment on the pool"
	case d.WithPDB == 0:
		d.Reason = fmt.Sprintf("%s, none behind a PodDisruptionBudget", cli.Plural(d.Models, "model Deployment"))
	default:
		d.Inference = true
		d.Reason = fmt.Sprintf("%s, %d behind a PodDisruptionBudget, no training gang", cli.Plural(d.Models, "model Deployment"), d.WithPDB)
	}
	return d
}

// RunArgs are the arguments of `kubectl gang-drain` that drain the pool
// chosen by selector as an inference pool with these options: run with
// --inference and the flags that carry o (the bandwidth included).
func RunArgs(selector string, o Options) []string {
	args := []string{"run", "--inference", "-l", selector}
	args = append(args, o.Bandwidth.Args()...)
	if o.MinServing > 0 {
		args = append(args, "--min-serving", strconv.FormatFloat(o.MinServing, 'g', -1, 64))
	}
	if o.NodesPerWave > 0 {
		args = append(args, "--nodes-per-wave", strconv.Itoa(o.NodesPerWave))
	}
	if o.MaxColdStart > 0 {
		args = append(args, "--max-cold-start", o.MaxColdStart.String())
	}
	if o.NoSurge {
		args = append(args, "--surge=false")
	}
	if o.AcceptNoReadinessProbe {
		args = append(args, "--accept-no-readiness-probe")
	}
	return args
}
