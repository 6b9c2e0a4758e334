package gang

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
)

// OnTimeout is what a drain does with a gang whose checkpoint did not come
// (no acknowledgement, deadline or heartbeat passed, failed, declined, or
// the gang does not speak the protocol).
type OnTimeout string

// OnTimeout policies.
const (
	// OnTimeoutStop stops the gang anyway; work since its last checkpoint is
	// lost.
	OnTimeoutStop OnTimeout = "stop"
	// OnTimeoutAbort withdraws the request and leaves the gang running; its
	// nodes are marked failed and stay cordoned. A re-run asks again.
	OnTimeoutAbort OnTimeout = "abort"
	// OnTimeoutWait keeps waiting (until the run's own timeout or Ctrl-C).
	OnTimeoutWait OnTimeout = "wait"
)

// ParseOnTimeout checks an --on-timeout value.
func ParseOnTimeout(s string) (OnTimeout, error) {
	switch OnTimeout(s) {
	case OnTimeoutStop, OnTimeoutAbort, OnTimeoutWait:
		return OnTimeout(s), nil
	}
	return "", fmt.Errorf("unknown --on-timeout value %q: want stop, abort or wait", s)
}

// Budget is a number of GPUs or a percentage of the chosen nodes' GPUs.
type Budget struct {
	Value   int
	Percent bool
}

// IsZero reports an unset budget (no limit).
func (b Budget) IsZero() bool { return b.Value == 0 && !b.Percent }

// ParseBudget reads "N" or "P%".
func ParseBudget(s string) (Budget, error) {
	if s == "" {
		return Budget{}, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.Atoi(p)
		if err != nil || v <= 0 || v > 100 {
			return Budget{}, fmt.Errorf("--max-unavailable-gpus %q: want a percentage between 1%% and 100%%", s)
		}
		return Budget{Value: v, Percent: true}, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		return Budget{}, fmt.Errorf("--max-unavailable-gpus %q: want a positive number of GPUs or a percentage", s)
	}
	return Budget{Value: v}, nil
}

// Of resolves the budget against a total number of GPUs; 0 budget means
// no limit (returns -1).
func (b Budget) Of(total int64) int64 {
	if b.IsZero() {
		return -1
	}
	if b.Percent {
		return total * int64(b.Value) / 100
	}
	return int64(b.Value)
}

// Options configure a drain run.
type Options struct {
	// RunID resumes or names a run; empty picks the run recorded on the
	// nodes, or a new one.
	RunID string
	// Requester names who runs the drain (recorded on nodes and requests).
	Requester string
	// Reason goes into checkpoint requests.
	Reason string
	// Keys are the checkpoint protocol's annotation keys.
	Keys checkpoint.Keys
	// Timeouts for acknowledgement and heartbeat.
	Timeouts checkpoint.Timeouts
	// CheckpointDeadline is how long a gang has to become ready-to-stop.
	CheckpointDeadline time.Duration
	// OnTimeout decides what happens when no checkpoint comes.
	OnTimeout OnTimeout
	// MaxGangsInFlight bounds gangs checkpointing or stopping at once (0:
	// no bound).
	MaxGangsInFlight int
	// MaxUnavailableGPUs bounds the GPUs of the chosen nodes taken out at
	// once (zero: no bound).
	MaxUnavailableGPUs Budget
	// DeleteEmptyDirData allows evicting pods with emptyDir volumes.
	DeleteEmptyDirData bool
	// Force allows evicting pods without a controller.
	Force bool
	// DisableEviction deletes pods instead of evicting them, bypassing
	// PodDisruptionBudgets (break-glass).
	DisableEviction bool
	// DeleteStoppedPods makes the run delete a stopped gang's pods itself
	// once their Jobs are suspended, instead of waiting for the Job
	// controller to (drain_delete.go), through Drainer.PodClient.
	DeleteStoppedPods bool
	// DryRun computes the steps without changing anything.
	DryRun bool
	// PollInterval is how often states are re-read (default 1s).
	PollInterval time.Duration
	// StopTimeout bounds the wait for a stopped gang's pods to go (default
	// 10m).
	StopTimeout time.Duration
	// EvictionTimeout bounds evicting one pod (0: the run's deadline).
	EvictionTimeout time.Duration
	// RestoreTimeout bounds the wait for a reactivated gang to be admitted
	// and Ready (default 10m).
	RestoreTimeout time.Duration
}

func (o Options) poll() time.Duration {
	if o.PollInterval > 0 {
		return o.PollInterval
	}
	return time.Second
}

func (o Options) stopTimeout() time.Duration {
	if o.StopTimeout > 0 {
		return o.StopTimeout
	}
	return 10 * time.Minute
}

func (o Options) restoreTimeout() time.Duration {
	if o.RestoreTimeout > 0 {
		return o.RestoreTimeout
	}
	return 10 * time.Minute
}
