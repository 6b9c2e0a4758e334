package fleetrun

import (
	"fmt"
	"os"
	"time"
)

// WaitSeconds is how long an engine waits before asking a gate or step
// again that answered "not yet" with a next opening: until next, in whole
// seconds rounded up; 0 when there is none or it has passed.
func WaitSeconds(next *time.Time, now time.Time) int64 {
	if next == nil || !next.After(now) {
		return 0
	}
	d := next.Sub(now)
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// WriteWaitFile writes WaitSeconds to path, "0" when there is no wait, and
// reports whether there is one. `fleet step` and `fleet gate` write it for
// --wait-file, the rendered template's output parameter "wait": with a
// wait the command exits 0, and the Workflow suspends that long and asks
// again (render's paced templates), so a "not yet" the clock ends is
// neither a failed try nor one retry per backoff interval.
func WriteWaitFile(path string, next *time.Time, now time.Time) (int64, error) {
	s := WaitSeconds(next, now)
	if err := os.WriteFile(path, []byte(fmt.Sprint(s)), 0o600); err != nil {
		return 0, fmt.Errorf("--wait-file: %w", err)
	}
	return s, nil
}
