package nccl

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// DefaultGateSize is the message size whose bus bandwidth is gated: 8 GiB,
// the top of the -b 1G -e 8G sweep the test job runs. Small sizes are
// latency-bound, so the average bus bandwidth nccl-tests prints mixes two
// different things and is not gated.
const DefaultGateSize int64 = 8 << 30

// DefaultTolerance is how far below the baseline a run may fall: 10%.
const DefaultTolerance = 0.10

// Verdict is the outcome of a gate.
type Verdict string

// Verdicts.
const (
	VerdictPass Verdict = "PASS"
	VerdictWarn Verdict = "WARN"
	VerdictFail Verdict = "FAIL"
)

// GateInput is what Gate compares.
type GateInput struct {
	Result *Result
	// SizeBytes is the gated message size (DefaultGateSize when 0).
	SizeBytes int64
	// Baseline is the pool's baseline; nil when none is stored.
	Baseline *Baseline
	// Tolerance is the allowed fraction below the baseline (0.1 = 10%).
	Tolerance float64
	// ExpectedRanks is the number of ranks the job should have had (nodes
	// times GPUs per node); 0 skips the check.
	ExpectedRanks int
	// Nodes, GPUsPerNode and Fabric are this run's shape, compared with
	// the baseline's: a run on other nodes counts, GPUs or fabric measures
	// something else (0 and "" skip the comparison).
	Nodes, GPUsPerNode int
	Fabric             string
	// MinBusBW is an absolute floor in GB/s (--min-busbw): below it fails,
	// with or without a baseline; 0 sets none.
	MinBusBW float64
	// Failed says the test exited non-zero (its pod failed). all_reduce_perf
	// exits with EXIT_FAILURE when it counted wrong values or the average
	// bandwidth fell under NCCL_TESTS_MIN_BW (src/common.cu, end of run()).
	Failed bool
}

// GateResult explains a verdict.
type GateResult struct {
	Verdict   Verdict  `json:"verdict"`
	Reasons   []string `json:"reasons,omitempty"`
	SizeBytes int64    `json:"sizeBytes"`
	// BusBW is the out-of-place bus bandwidth at SizeBytes (GB/s).
	BusBW float64 `json:"busBwGBps"`
	// BaselineBusBW is the stored baseline (GB/s), 0 when none.
	BaselineBusBW float64 `json:"baselineBusBwGBps,omitempty"`
	// MinBusBW is the lowest passing value: baseline × (1 − tolerance).
	MinBusBW    float64 `json:"minBusBwGBps,omitempty"`
	Tolerance   float64 `json:"tolerance"`
	Wrong       int64   `json:"wrong"`
	OutOfBounds int64   `json:"outOfBounds"`
}

// Gate decides a run: any #wrong or out-of-bounds value fails it whatever
// the bandwidth; so does a missing gated size, a rank count other than
// expected, a bus bandwidth below the --min-busbw floor, a run whose
// GPUs per node or fabric are not the baseline's (or one node against
// several), or a bus
// bandwidth below baseline × (1 − tolerance). Without a baseline the
// floor judges; without either the bandwidth is reported with a warning.
func Gate(in GateInput) GateResult {
	size := in.SizeBytes
	if size <= 0 {
		size = DefaultGateSize
	}
	tol := in.Tolerance
	if tol < 0 || tol >= 1 || math.IsNaN(tol) {
		tol = DefaultTolerance
	}
	g := GateResult{Verdict: VerdictPass, SizeBytes: size, Tolerance: tol}
	fail := func(format string, args ...any) {
		g.Verdict = VerdictFail
		g.Reasons = append(g.Reasons, fmt.Sprintf(format, args...))
	}
	warn := func(format string, args ...any) {
		if g.Verdict == VerdictPass {
			g.Verdict = VerdictWarn
		}
		g.Reasons = append(g.Reasons, fmt.Sprintf(format, args...))
	}
	if in.Failed {
		fail("the test exited non-zero (its pod failed)")
	}
	if in.Result == nil || len(in.Result.Rows) == 0 {
		fail("no all_reduce_perf results in the output")
		return g
	}
	r := in.Result
	g.Wrong = r.WrongTotal()
	if g.Wrong > 0 {
		fail("%d wrong element(s) reported (#wrong)", g.Wrong)
	}
	if r.OutOfBounds != nil {
		g.OutOfBounds = *r.OutOfBounds
		if *r.OutOfBounds > 0 {
			fail("%d out-of-bounds value(s)", *r.OutOfBounds)
		}
	}
	// An error line alone does not fail the run: at exit all_reduce_perf
	// prints ncclGetLastError(NULL) unconditionally (NVIDIA/nccl-tests src/common.cu
	// @d2d40cc8249378efa4d7e2c949528c15eeb7d8e7, end of run(): PRINT("%s\n", ncclGetLastError(NULL))),
	// which holds NCCL's last WARN even when every collective succeeded. Its
	// verdict is its exit status, the #wrong counts and the bandwidth, all
	// checked here; the line is shown as a warning.
	for _, e := range r.Errors {
		warn("nccl-tests reported an NCCL error (not a failure by itself): %s", e)
	}
	if in.ExpectedRanks > 0 && r.Ranks > 0 && r.Ranks != in.ExpectedRanks {
		fail("%d ranks ran, want %d", r.Ranks, in.ExpectedRanks)
	}
	row, ok := r.Row(size)
	if !ok {
		fail("message size %s not in the results (largest is %s)", FormatBytes(size), FormatBytes(r.Rows[len(r.Rows)-1].SizeBytes))
		return g
	}
	m := row.OutOfPlace
	if !m.Valid {
		m = row.InPlace
	}
	g.BusBW = m.BusBW
	if in.MinBusBW > 0 && g.BusBW < in.MinBusBW {
		fail("busbw %.1f GB/s at %s is below the floor of %.1f GB/s (--min-busbw)", g.BusBW, FormatBytes(size), in.MinBusBW)
	}
	if in.Baseline == nil || in.Baseline.BusBW <= 0 {
		switch {
		case in.MinBusBW > 0:
			g.MinBusBW = in.MinBusBW
			g.Reasons = append(g.Reasons, fmt.Sprintf("busbw %.1f GB/s at %s against the --min-busbw floor %.1f; no baseline stored for this pool", g.BusBW, FormatBytes(size), in.MinBusBW))
		default:
			if g.Verdict == VerdictPass {
				g.Verdict = VerdictWarn
			}
			g.Reasons = append(g.Reasons, fmt.Sprintf("busbw %.1f GB/s at %s judged against nothing: no baseline stored for this pool and no --min-busbw floor (save a baseline with --save-baseline on a known-good pool)", g.BusBW, FormatBytes(size)))
		}
		return g
	}
	b := in.Baseline
	var differ []string
	// Bus bandwidth is corrected for the number of ranks so that runs of
	// other sizes compare ("To obtain a bus bandwidth which should be
	// independent of the number of ranks n, we apply a correction factor",
	// NVIDIA/nccl-tests@a0b82b2 doc/PERFORMANCE.md): a pool that
	// autoscaled, or lost a node it still has to replace, is judged by its
	// baseline. One node is another thing: its GPUs talk over NVLink
	// alone, never the network.
	if b.Nodes > 0 && in.Nodes > 0 && b.Nodes != in.Nodes {
		if (b.Nodes == 1) != (in.Nodes == 1) {
			differ = append(differ, fmt.Sprintf("%d nodes, the baseline %d", in.Nodes, b.Nodes))
		} else {
			if g.Verdict == VerdictPass {
				g.Verdict = VerdictWarn
			}
			g.Reasons = append(g.Reasons, fmt.Sprintf("%d nodes, the baseline %d: bus bandwidth is corrected for the rank count, so it is compared", in.Nodes, b.Nodes))
		}
	}
	if b.GPUsPerNode > 0 && in.GPUsPerNode > 0 && b.GPUsPerNode != in.GPUsPerNode {
		differ = append(differ, fmt.Sprintf("%d GPUs per node, the baseline %d", in.GPUsPerNode, b.GPUsPerNode))
	}
	if b.Fabric != "" && in.Fabric != "" && b.Fabric != in.Fabric {
		differ = append(differ, fmt.Sprintf("fabric %s, the baseline %s", in.Fabric, b.Fabric))
	}
	if len(differ) > 0 {
		// Other GPUs per node split the traffic between NVLink and the
		// network otherwise, another fabric is another network: the bus
		// bandwidth of another shape says nothing of this one.
		fail("this run is not comparable with the pool's baseline: %s (run with the baseline's shape, or save a baseline of this one on a known-good pool)", strings.Join(differ, ", "))
	}
	g.BaselineBusBW = in.Baseline.BusBW
	g.MinBusBW = in.Baseline.BusBW * (1 - tol)
	fromBaseline := g.MinBusBW
	if in.MinBusBW > g.MinBusBW {
		g.MinBusBW = in.MinBusBW
	}
	if in.Baseline.SizeBytes > 0 && in.Baseline.SizeBytes != size {
		if g.Verdict == VerdictPass {
			g.Verdict = VerdictWarn
		}
		g.Reasons = append(g.Reasons, fmt.Sprintf("baseline was measured at %s, this run is gated at %s", FormatBytes(in.Baseline.SizeBytes), FormatBytes(size)))
	}
	if g.BusBW < fromBaseline {
		fail("busbw %.1f GB/s at %s is below the baseline %.1f GB/s by %.1f%% (tolerance %s)",
			g.BusBW, FormatBytes(size), g.BaselineBusBW, 100*(1-g.BusBW/g.BaselineBusBW), FormatPercent(tol))
	}
	return g
}

// ParseTolerance reads "10%", "10" (percent) or "0.1" (a fraction below 1).
func ParseTolerance(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	t = strings.TrimSuffix(t, "%")
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("invalid tolerance %q: want a percentage such as 10%%", s)
	}
	if pct || v >= 1 {
		v /= 100
	}
	if v < 0 || v >= 1 {
		return 0, fmt.Errorf("invalid tolerance %q: want between 0%% and 100%%", s)
	}
	return v, nil
}

// FormatPercent prints a fraction as a percentage ("10%").
func FormatPercent(f float64) string {
	return strconv.FormatFloat(f*100, 'f', -1, 64) + "%"
}

// ParseBytes reads a size such as 8G, 8GiB, 512M, 1024 (bytes). Suffixes
// are binary, as nccl-tests reads them.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("invalid size %q: want bytes or a K/M/G suffix such as 8G", s)
	}
	return n * mult, nil
}

// FormatBytes prints a size with the largest exact binary suffix ("8G").
func FormatBytes(n int64) string {
	for _, u := range []struct {
		s string
		v int64
	}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n >= u.v && n%u.v == 0 {
			return strconv.FormatInt(n/u.v, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}
