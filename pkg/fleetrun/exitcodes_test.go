package fleetrun

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// upToUpgrade runs canary-a's steps before its pool upgrade.
func upToUpgrade(t *testing.T, h *harness) {
	t.Helper()
	for _, s := range []string{"gate", "preflight-1-38", "pool-gpu-a-1-38-pdb-blockers", "pool-gpu-a-1-38-drain"} {
		if r := h.step(t, "canary-a", s); r.ExitCode != 0 {
			t.Fatalf("%s: %+v", s, r)
		}
	}
}

func (e *fakeExec) count(prefix string) int {
	n := 0
	for _, c := range e.commands() {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// TestCommandExitCodes: an action's command is read as 0 done, 4 not yet,
// anything else a failure with its output kept; the AWS CLI's 252-255 and a
// signal that the step did not send are failures, not "not yet".
func TestCommandExitCodes(t *testing.T) {
	const up = "upgrade-pool --context"
	for _, tc := range []struct {
		name   string
		code   int
		signal string
		want   int
		phase  string
	}{
		{"done", 0, "", cli.ExitOK, PhaseCompleted},
		{"not yet", 4, "", cli.ExitIncomplete, PhasePending},
		{"aws bad parameter", 252, "", cli.ExitFindings, PhaseFailed},
		{"aws no credentials", 253, "", cli.ExitFindings, PhaseFailed},
		{"aws service error", 254, "", cli.ExitFindings, PhaseFailed},
		{"aws failure", 255, "", cli.ExitFindings, PhaseFailed},
		{"usage of another tool", 2, "", cli.ExitFindings, PhaseFailed},
		{"killed by the kernel", 0, "killed", cli.ExitFindings, PhaseFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			upToUpgrade(t, h)
			h.exec.codes[up] = tc.code
			if tc.signal != "" {
				h.exec.signals = map[string]string{up: tc.signal}
			}
			r := h.step(t, "canary-a", "pool-gpu-a-1-38-upgrade")
			if r.ExitCode != tc.want || r.Phase != tc.phase {
				t.Fatalf("exit %d phase %s (%s); want exit %d phase %s", r.ExitCode, r.Phase, r.Message, tc.want, tc.phase)
			}
			if tc.phase == PhaseFailed {
				if !strings.Contains(r.Message, "upgrade-pool") || !strings.Contains(r.Message, "its output is the attempt's evidence") {
					t.Errorf("message %q", r.Message)
				}
				var stdout, stderr bool
				for _, k := range r.Evidence {
					stdout = stdout || strings.HasSuffix(k, "/report.json") || strings.HasSuffix(k, "/stdout.log")
					stderr = stderr || strings.HasSuffix(k, "/stderr.log")
				}
				if !stdout || !stderr {
					t.Errorf("evidence %v lacks the command's output", r.Evidence)
				}
			}
		})
	}
}

// TestPluginExitCodes: a plugin's code outside the suite's table is a
// failure, not a code read by another tool's rules.
func TestPluginExitCodes(t *testing.T) {
	h := newHarness(t, nil)
	h.step(t, "canary-a", "gate")
	h.step(t, "canary-a", "preflight-1-38")
	h.exec.codes[BinPDBBlockers+" -l"] = 137
	r := h.step(t, "canary-a", "pool-gpu-a-1-38-pdb-blockers")
	if r.Phase != PhaseFailed || !strings.Contains(r.Message, "not an exit code of the suite's table") {
		t.Fatalf("plugin exit 137: %+v", r)
	}
}

// TestUpgradeChecksBeforeIssuing: a re-run after success issues nothing; a
// re-run while the update is in flight issues nothing until the step's
// expected duration has passed; then the command runs again.
func TestUpgradeChecksBeforeIssuing(t *testing.T) {
	const up = "upgrade-pool --context canary-a"
	h := newHarness(t, nil)
	upToUpgrade(t, h)
	h.exec.lazy = true
	r := h.step(t, "canary-a", "pool-gpu-a-1-38-upgrade")
	if r.ExitCode != cli.ExitIncomplete || h.exec.count(up) != 1 {
		t.Fatalf("first attempt: %+v, %d commands", r, h.exec.count(up))
	}
	h.clock = h.clock.Add(10 * time.Minute)
	r = h.step(t, "canary-a", "pool-gpu-a-1-38-upgrade")
	if r.ExitCode != cli.ExitIncomplete || !strings.Contains(r.Message, "in flight: attempt 1 issued the upgrade") || h.exec.count(up) != 1 {
		t.Fatalf("in flight: %+v, %d commands", r, h.exec.count(up))
	}
	// Past the expected hour: the provider is asked again.
	h.clock = h.clock.Add(time.Hour)
	h.exec.lazy = false
	r = h.step(t, "canary-a", "pool-gpu-a-1-38-upgrade")
	if r.ExitCode != 0 || h.exec.count(up) != 2 {
		t.Fatalf("after the expected duration: %+v, %d commands", r, h.exec.count(up))
	}
	// The step's record says it is done; a replanned run with the same
	// nodes on the target issues nothing: the state is checked first.
	st := h.state(t, "canary-a")
	st.Step("pool-gpu-a-1-38-upgrade").Phase = PhasePending
	if err := WriteState(context.Background(), h.p.Store, st); err != nil {
		t.Fatal(err)
	}
	r = h.step(t, "canary-a", "pool-gpu-a-1-38-upgrade")
	if r.ExitCode != 0 || !strings.Contains(r.Message, "already done, nothing issued") || h.exec.count(up) != 2 {
		t.Fatalf("re-run after success: %+v, %d commands", r, h.exec.count(up))
	}
}
