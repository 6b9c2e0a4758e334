// Command vspluto measures kubectl-deprecations against pluto side by
// side: both scan the shared corpus copied N times (ten by default, about
// 8,930 files), in alternating pairs in one run on one machine, as whole
// processes. It prints each command's wall time, CPU time (user+system)
// and peak RSS per pair, their medians, and the median of the pairwise
// ratios pluto/ours. `make bench` runs it.
//
//	go run ./hack/vspluto -ours bin/kubectl-deprecations -pluto "$PLUTO_BIN"
//
// pluto comes from -pluto or PLUTO_BIN; `make vspluto` (and `make bench`)
// gets it from hack/vspluto/pluto.sh, which builds pluto v5.24.0 from a
// checkout of its repository named by PLUTO_SRC into the component cache
// (the Go module proxy does not serve that version). Without a binary the
// command says how to get one and exits 0 having measured nothing (exit 2
// with -require).
//
// The children are started straight from this small process: Linux
// counts the memory a parent has when it starts a child into the child's
// ru_maxrss, and this one holds a few MB (see hack/peakrss).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

type sample struct {
	wall, cpu time.Duration
	rssKiB    int64
}

func main() {
	ours := flag.String("ours", "bin/kubectl-deprecations", "kubectl-deprecations binary")
	pluto := flag.String("pluto", os.Getenv("PLUTO_BIN"), "pluto v5.24.0 binary (default $PLUTO_BIN)")
	corpus := flag.String("corpus", filepath.Join("..", "shared", "corpus"), "the shared corpus")
	copies := flag.Int("copies", 10, "copies of the corpus to scan")
	pairs := flag.Int("pairs", 9, "alternating pairs (at least 9 for a median worth the name)")
	target := flag.String("target", "v1.37", "target release for both tools")
	require := flag.Bool("require", false, "fail (exit 2) when pluto or the corpus is missing")
	flag.Parse()
	skip := func(why string) {
		fmt.Println("vspluto: skipped:", why)
		if *require {
			os.Exit(2)
		}
		os.Exit(0)
	}
	if *pluto == "" {
		skip("no pluto binary: make vspluto PLUTO_SRC=<checkout of github.com/FairwindsOps/pluto at v5.24.0> builds one, or set PLUTO_BIN")
	}
	if _, err := os.Stat(filepath.Join(*corpus, "README.md")); err != nil {
		skip("corpus not present at " + *corpus)
	}
	dir, err := os.MkdirTemp("", "vspluto-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	data := filepath.Join(dir, "corpus")
	for i := 0; i < *copies; i++ {
		dst := filepath.Join(data, fmt.Sprintf("copy-%02d", i))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			fail(err)
		}
		if out, err := exec.Command("cp", "-R", *corpus+"/.", dst).CombinedOutput(); err != nil {
			fail(fmt.Errorf("copying the corpus: %v: %s", err, out))
		}
	}
	files := 0
	_ = filepath.WalkDir(data, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files++
		}
		return nil
	})
	oursCmd := []string{*ours, "--target", *target, "-f", data, "-o", "json"}
	// pluto exits 2, 3 or 4 when it finds a deprecated, a removed or a
	// replacement-less apiVersion (README of FairwindsOps/pluto v5.24.0,
	// "Exit Codes"); its --ignore-* flags keep the exit code about whether
	// it worked, as ours is judged.
	plutoCmd := []string{*pluto, "detect-files", "-d", data, "--target-versions", "k8s=" + *target + ".0", "-o", "json",
		"--ignore-deprecations", "--ignore-removals", "--ignore-unavailable-replacements"}
	// PLUTO_ARGS replaces pluto's arguments; {dir} stands for the copies.
	if extra := os.Getenv("PLUTO_ARGS"); extra != "" {
		plutoCmd = append([]string{*pluto}, strings.Fields(strings.ReplaceAll(extra, "{dir}", data))...)
	}
	fmt.Printf("corpus x%d: %d files in %s\nours:  %s\npluto: %s\n", *copies, files, data, strings.Join(oursCmd, " "), strings.Join(plutoCmd, " "))
	// One untimed run of each warms the page cache for both alike.
	run(oursCmd)
	run(plutoCmd)
	var o, p []sample
	var wallRatio, cpuRatio []float64
	fmt.Printf("%-5s %22s %22s %16s\n", "pair", "ours wall/cpu/rss", "pluto wall/cpu/rss", "pluto/ours w/c")
	for i := 0; i < *pairs; i++ {
		var a, b sample
		// Alternate which goes first, so neither always finds the
		// machine in the state the other left it in.
		if i%2 == 0 {
			a, b = run(oursCmd), run(plutoCmd)
		} else {
			b, a = run(plutoCmd), run(oursCmd)
		}
		o, p = append(o, a), append(p, b)
		wr, cr := b.wall.Seconds()/a.wall.Seconds(), b.cpu.Seconds()/a.cpu.Seconds()
		wallRatio, cpuRatio = append(wallRatio, wr), append(cpuRatio, cr)
		fmt.Printf("%-5d %22s %22s %8.2f %7.2f\n", i+1, a, b, wr, cr)
	}
	mo, mp := medians(o), medians(p)
	fmt.Printf("median ours:  wall %.3f s  cpu %.3f s  peak RSS %.1f MB\n", mo.wall.Seconds(), mo.cpu.Seconds(), float64(mo.rssKiB)/1024)
	fmt.Printf("median pluto: wall %.3f s  cpu %.3f s  peak RSS %.1f MB\n", mp.wall.Seconds(), mp.cpu.Seconds(), float64(mp.rssKiB)/1024)
	fmt.Printf("median of pairwise ratios pluto/ours: wall %.2f  cpu %.2f (max peak RSS ours %.1f MB, pluto %.1f MB)\n",
		median(wallRatio), median(cpuRatio), float64(maxRSS(o))/1024, float64(maxRSS(p))/1024)
}

func (s sample) String() string {
	return fmt.Sprintf("%.3f/%.3f/%.0fMB", s.wall.Seconds(), s.cpu.Seconds(), float64(s.rssKiB)/1024)
}

// run starts argv with stdout and stderr on /dev/null and returns its
// wall time, user+system CPU and peak RSS. Ours exits 1 on findings
// (and 3 for a file it could not read); pluto runs with its findings exit
// codes off. Anything else is a failure of the run, not a sample.
func run(argv []string) sample {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		fail(err)
	}
	defer null.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = null, null
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		fail(fmt.Errorf("%s: %w", argv[0], err))
	}
	ps := cmd.ProcessState
	s := sample{wall: wall, cpu: ps.UserTime() + ps.SystemTime()}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		s.rssKiB = int64(ru.Maxrss)
	}
	if code := ps.ExitCode(); code > 3 || code < 0 {
		fail(fmt.Errorf("%s exited %d: rerun by hand to see why", argv[0], code))
	}
	return s
}

func medians(s []sample) sample {
	var w, c, r []float64
	for _, x := range s {
		w, c, r = append(w, float64(x.wall)), append(c, float64(x.cpu)), append(r, float64(x.rssKiB))
	}
	return sample{wall: time.Duration(median(w)), cpu: time.Duration(median(c)), rssKiB: int64(median(r))}
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func maxRSS(s []sample) int64 {
	var m int64
	for _, x := range s {
		m = max(m, x.rssKiB)
	}
	return m
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "vspluto:", err)
	os.Exit(1)
}
