// Package bench measures a plugin beside its floor, the least work that
// answers from the same data (for example raw reads of what the plugin
// reads), in the same run on the same control plane: whole processes,
// started through hack/peakrss for their own peak RSS, the plugin and the
// floor alternating (plugin first in odd pairs, floor first in even ones)
// so that neither side always meets a warmer server, and judged by the
// median of the pairwise wall-time ratios rather than by the best run.
//
// Every scale test of e2e/ measures through Compare, and each prints both
// sides' wall, CPU and peak RSS per pair and the line
// "median ratio to the floor: X.XX". Like plugintest it never touches a
// cluster itself.
package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
)

// Proc is one process of a side: its argv (the binary first) and extra
// environment.
type Proc struct {
	Args []string
	Env  []string
}

// Side is what is measured: one or more processes started together. Its
// wall time runs until the last exits, its CPU is their sum and its peak
// RSS the sum of their peaks (they run at once).
type Side struct {
	Name  string
	Procs []Proc
	// Before, when set, runs before each run, outside its measured time:
	// for a side that changes what it reads (a migration), to put the
	// cluster back as the side expects it. An error fails the test.
	Before func() error
	// Check, when set, judges each run's processes (exit codes, output);
	// an error fails the test.
	Check func(runs []plugintest.Result) error
	// KeepStdout keeps what the processes print in the results; by
	// default it is counted (StdoutBytes) and dropped, since a report of
	// 50,000 pods kept for every run would fill the test's memory.
	KeepStdout bool
}

// Sample is one run of a side.
type Sample struct {
	Wall    time.Duration
	CPU     time.Duration
	PeakKiB int64
	// StdoutBytes is what the processes printed, in all.
	StdoutBytes int64
	Results     []plugintest.Result
}

// Run runs side once and returns its sample.
func Run(t testing.TB, ctx context.Context, side Side) Sample {
	t.Helper()
	peak := plugintest.PeakRSS(t)
	if side.Before != nil {
		if err := side.Before(); err != nil {
			t.Fatalf("%s: before the run: %v", side.Name, err)
		}
	}
	type done struct {
		res plugintest.Result
		out int64
		cpu time.Duration
		kib int64
		err error
	}
	out := make([]done, len(side.Procs))
	var wg sync.WaitGroup
	began := time.Now()
	for i, p := range side.Procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, peak, p.Args...)
			cmd.Env = append(cmd.Environ(), p.Env...)
			var stdout, stderr bytes.Buffer
			var counted counter
			cmd.Stdout, cmd.Stderr = &counted, &stderr
			if side.KeepStdout {
				cmd.Stdout = io.MultiWriter(&counted, &stdout)
			}
			start := time.Now()
			err := cmd.Run()
			d := done{res: plugintest.Result{Stdout: stdout.String(), Duration: time.Since(start)}, out: int64(counted)}
			var ee *exec.ExitError
			switch {
			case err == nil:
			case errors.As(err, &ee):
				d.res.ExitCode = ee.ExitCode()
			default:
				d.err = err
			}
			if cmd.ProcessState != nil {
				if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
					d.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
				}
			}
			var ok bool
			if d.res.Stderr, d.kib, ok = plugintest.SplitPeakRSS(stderr.String()); !ok && d.err == nil {
				d.err = fmt.Errorf("no peak RSS from hack/peakrss\n%s", plugintest.LastLines(stderr.String(), 20))
			}
			out[i] = d
		}()
	}
	wg.Wait()
	s := Sample{Wall: time.Since(began)}
	for i, d := range out {
		if d.err != nil {
			t.Fatalf("%s: %s: %v", side.Name, strings.Join(side.Procs[i].Args, " "), d.err)
		}
		s.CPU += d.cpu
		s.PeakKiB += d.kib
		s.StdoutBytes += d.out
		s.Results = append(s.Results, d.res)
	}
	if side.Check != nil {
		if err := side.Check(s.Results); err != nil {
			t.Fatalf("%s: %v", side.Name, err)
		}
	}
	return s
}

// Exits is a Check that every process exited with one of codes.
func Exits(codes ...int) func([]plugintest.Result) error {
	return func(rs []plugintest.Result) error {
		for _, r := range rs {
			if !slices.Contains(codes, r.ExitCode) {
				return fmt.Errorf("exit %d, want one of %v\n%s", r.ExitCode, codes, plugintest.LastLines(r.Stderr, 20))
			}
		}
		return nil
	}
}

// Comparison is the outcome of Compare.
type Comparison struct {
	Plugin, Floor Side
	// PluginRuns and FloorRuns are the samples, pair by pair.
	PluginRuns, FloorRuns []Sample
	// Ratios are plugin wall / floor wall, pair by pair.
	Ratios []float64
}

// Pairs is how many pairs Compare runs unless told otherwise.
const Pairs = 5

// Compare runs plugin and floor pairs times (Pairs when 0), alternating
// which goes first, and logs every pair and the medians.
func Compare(t testing.TB, ctx context.Context, plugin, floor Side, pairs int) Comparison {
	t.Helper()
	if pairs <= 0 {
		pairs = Pairs
	}
	c := Comparison{Plugin: plugin, Floor: floor}
	for i := range pairs {
		var p, f Sample
		if i%2 == 0 {
			p, f = Run(t, ctx, plugin), Run(t, ctx, floor)
		} else {
			f, p = Run(t, ctx, floor), Run(t, ctx, plugin)
		}
		c.PluginRuns, c.FloorRuns = append(c.PluginRuns, p), append(c.FloorRuns, f)
		c.Ratios = append(c.Ratios, float64(p.Wall)/float64(max(f.Wall, time.Millisecond)))
		t.Logf("pair %d: %s %s | %s %s | ratio %.2f", i+1, plugin.Name, p, floor.Name, f, c.Ratios[i])
	}
	t.Logf("%s: median %s", plugin.Name, MedianSample(c.PluginRuns))
	t.Logf("%s: median %s", floor.Name, MedianSample(c.FloorRuns))
	t.Logf("median ratio to the floor: %.2f (%s against %s)", c.Median(), plugin.Name, floor.Name)
	return c
}

// Median is the median of the pairwise ratios.
func (c Comparison) Median() float64 { return median(c.Ratios) }

// PeakKiB is the plugin's largest peak RSS over the runs.
func (c Comparison) PeakKiB() int64 {
	var m int64
	for _, s := range c.PluginRuns {
		m = max(m, s.PeakKiB)
	}
	return m
}

// String prints a sample's wall, CPU and peak RSS.
func (s Sample) String() string {
	return fmt.Sprintf("wall %s CPU %s peak RSS %d MB", s.Wall.Round(time.Millisecond), s.CPU.Round(time.Millisecond), s.PeakKiB>>10)
}

// MedianSample is the median of each figure over samples (each figure on
// its own, so the result need not be one of the runs).
func MedianSample(samples []Sample) Sample {
	var walls, cpus, peaks []float64
	for _, s := range samples {
		walls = append(walls, float64(s.Wall))
		cpus = append(cpus, float64(s.CPU))
		peaks = append(peaks, float64(s.PeakKiB))
	}
	return Sample{Wall: time.Duration(median(walls)), CPU: time.Duration(median(cpus)), PeakKiB: int64(median(peaks))}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

type counter int64

func (c *counter) Write(p []byte) (int, error) { *c += counter(len(p)); return len(p), nil }
