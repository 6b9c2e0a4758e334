package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestCompareAlternates runs two sides of real processes: each pair runs
// both, plugin first in odd pairs and floor first in even ones, a side's
// processes run at once, and each sample carries its processes' results.
func TestCompareAlternates(t *testing.T) {
	log := t.TempDir() + "/order"
	side := func(name string, procs int) Side {
		s := Side{Name: name, KeepStdout: true}
		for i := range procs {
			s.Procs = append(s.Procs, Proc{Args: []string{"/bin/sh", "-c", fmt.Sprintf("echo %s >> %s; echo out-%d", name, log, i)}})
		}
		s.Check = func(rs []plugintest.Result) error {
			if len(rs) != procs {
				return fmt.Errorf("%d results", len(rs))
			}
			for i, r := range rs {
				if r.ExitCode != 0 || strings.TrimSpace(r.Stdout) != fmt.Sprintf("out-%d", i) {
					return fmt.Errorf("result %d: %s", i, r)
				}
			}
			return nil
		}
		return s
	}
	c := Compare(t, context.Background(), side("plugin", 1), side("floor", 3), 3)
	if len(c.Ratios) != 3 || len(c.PluginRuns) != 3 || len(c.FloorRuns) != 3 {
		t.Fatalf("comparison %+v", c)
	}
	order := strings.Fields(readFile(t, log))
	want := "plugin floor floor floor floor floor floor plugin plugin floor floor floor"
	if strings.Join(order, " ") != want {
		t.Errorf("order %v, want %s", order, want)
	}
	for _, s := range append(c.PluginRuns, c.FloorRuns...) {
		if s.Wall <= 0 || s.PeakKiB <= 0 {
			t.Errorf("sample %s", s)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
