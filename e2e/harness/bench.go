package harness

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// CPUTime returns the user plus system CPU time each running component has
// used so far, read from /proc (Linux), so a benchmark can charge the
// server's share of a run to the run.
func (cp *ControlPlane) CPUTime() map[string]time.Duration {
	out := map[string]time.Duration{}
	for name, pid := range cp.Pids() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses and may
		// hold spaces: state is field 3, utime 14 and stime 15.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		ut, err1 := strconv.ParseInt(f[11], 10, 64)
		st, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		// USER_HZ is 100 on every Linux architecture Go supports.
		out[name] = time.Duration(ut+st) * 10 * time.Millisecond
	}
	return out
}

// WaitIdle waits until the components together use less than busy CPUs
// (0.1: a tenth of one CPU) over a whole window, so that a benchmark
// measures the command and not a controller still working through a
// backlog. It returns how long it waited.
func (cp *ControlPlane) WaitIdle(ctx context.Context, window time.Duration, busy float64, timeout time.Duration) (time.Duration, error) {
	began := time.Now()
	sum := func() (d time.Duration) {
		for _, c := range cp.CPUTime() {
			d += c
		}
		return d
	}
	last := sum()
	err := Poll(ctx, "an idle control plane", window, timeout, func(context.Context) (bool, error) {
		now := sum()
		used := now - last
		last = now
		return time.Since(began) >= window && used.Seconds() < busy*window.Seconds(), nil
	})
	return time.Since(began), err
}
