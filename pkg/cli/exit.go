package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
)

// Exit codes shared by every plugin. When several apply, the worst wins in
// the order Interrupted > Usage > Unavailable > Incomplete > Findings > OK.
const (
	// ExitOK means the command ran fully and found nothing at or above --fail-on.
	ExitOK = 0
	// ExitFindings means the command ran and reports findings.
	ExitFindings = 1
	// ExitUsage means bad flags or arguments, or a local configuration error
	// such as an unreadable kubeconfig or an unknown context.
	ExitUsage = 2
	// ExitUnavailable means the cluster could not be evaluated: unreachable,
	// timed out, unauthorized or forbidden on a required read, or a required
	// API missing; or a local input could not be read (see InputErr).
	ExitUnavailable = 3
	// ExitIncomplete means a mutating command stopped before it finished but
	// recorded its state in the cluster; running it again resumes.
	ExitIncomplete = 4
	// ExitInterrupted means the command was interrupted (SIGINT or SIGTERM)
	// and stopped cleanly.
	ExitInterrupted = 130
)

// ExitCodesHelp is the full exit-code table, the one README lists. Each
// command's --help prints the rows it can return (ExitCodesFor).
const ExitCodesHelp = `Exit codes:
  0    ran fully; nothing at or above --fail-on
  1    ran; findings at or above --fail-on
  2    usage or local configuration error (bad flag, unknown context, unreadable kubeconfig)
  3    could not evaluate the cluster (unreachable, timeout, forbidden on a required read, API missing),
       or could not read an input file (missing, empty, or not what its flag takes)
  4    stopped before the end but resumable (mutating commands): run the same command again
  130  interrupted
  When several apply, the worst wins: 130 > 2 > 3 > 4 > 1 > 0.`

// OfflineAnnotation marks a command that never reaches a cluster (it
// prints embedded data or a file): it returns neither 1 nor 3.
const OfflineAnnotation = "gpufleet.dev/offline"

// NoFindingsAnnotation marks a command that reads the cluster and prints
// what is recorded there without judging it (gang-drain status): it has no
// findings, so it never returns 1.
const NoFindingsAnnotation = "gpufleet.dev/no-findings"

// ExitCodesFor is the exit-code table of one command: only the codes it
// can return, and --fail-on named only where the command has the flag.
// Mutating commands (those with --dry-run) can stop resumably (4). A
// command that reads a file a flag names (InputFileFlags) can refuse it
// (3), offline or not.
func ExitCodesFor(c *cobra.Command) string {
	offline := c.Annotations[OfflineAnnotation] != ""
	noFindings := c.Annotations[NoFindingsAnnotation] != ""
	files := len(InputFileFlags(c)) > 0
	var b strings.Builder
	b.WriteString("Exit codes:\n")
	switch {
	case offline:
		b.WriteString("  0    printed\n")
	case noFindings:
		b.WriteString("  0    ran fully\n")
	case c.Flags().Lookup("fail-on") != nil:
		b.WriteString("  0    ran fully; nothing at or above --fail-on\n")
		b.WriteString("  1    ran; findings at or above --fail-on\n")
	default:
		b.WriteString("  0    ran fully; no findings\n")
		b.WriteString("  1    ran; findings (what counts is said above)\n")
	}
	b.WriteString("  2    usage or local configuration error (bad flag, unknown context, unreadable kubeconfig)\n")
	worst := "130 > 2"
	switch {
	case !offline:
		b.WriteString("  3    could not evaluate the cluster (unreachable, timeout, forbidden on a required read, API missing)")
		if files {
			b.WriteString(",\n       or could not read an input file (" + inputFileCauses + ")")
		}
		b.WriteString("\n")
		worst += " > 3"
	case files:
		b.WriteString("  3    could not read an input file (" + inputFileCauses + ")\n")
		worst += " > 3"
	}
	if c.Flags().Lookup("dry-run") != nil {
		b.WriteString("  4    stopped before the end but resumable: run the same command again\n")
		worst += " > 4"
	}
	b.WriteString("  130  interrupted\n")
	switch {
	case !offline && noFindings:
		worst += " > 0"
	case !offline:
		worst += " > 1 > 0"
	case files:
		worst += " > 0"
	default:
		return strings.TrimRight(b.String(), "\n")
	}
	b.WriteString("  When several apply, the worst wins: " + worst + ".")
	return b.String()
}

// inputFileCauses are the ways a file a flag names is refused (exit 3).
const inputFileCauses = "missing, empty, or not what its flag takes"

// ExitError carries an exit code, the error to print and an optional hint
// (usually the exact command that helps). With no Err nothing is printed:
// the exit code alone is the answer (a command run on the user's behalf
// that spoke for itself).
type ExitError struct {
	Code int
	Err  error
	Hint string
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// UsageErr marks err as a usage or local configuration error (exit 2).
func UsageErr(err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: ExitUsage, Err: err}
}

// Usagef formats a usage error (exit 2).
func Usagef(format string, args ...any) error {
	return UsageErr(fmt.Errorf(format, args...))
}

// ClusterErr marks err as "could not evaluate the cluster" (exit 3).
func ClusterErr(err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: ExitUnavailable, Err: err}
}

// Incomplete marks err as "stopped but resumable" (exit 4).
func Incomplete(err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: ExitIncomplete, Err: err}
}

// WithHint attaches a hint line to err, keeping its exit code.
func WithHint(err error, hint string) error {
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return &ExitError{Code: ee.Code, Err: ee.Err, Hint: hint}
	}
	return &ExitError{Code: ExitCode(err), Err: err, Hint: hint}
}

// FindingsError reports that a command ran fully and has findings at or
// above the --fail-on threshold. The report itself has already been printed,
// so Run prints nothing for it.
type FindingsError struct {
	Count int
}

func (e *FindingsError) Error() string {
	return fmt.Sprintf("%d finding(s) at or above --fail-on", e.Count)
}

// Findings returns a FindingsError for n findings, or nil when n is zero.
func Findings(n int) error {
	if n <= 0 {
		return nil
	}
	return &FindingsError{Count: n}
}

// ExitCode maps an error to the suite's exit code.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var fe *FindingsError
	if errors.As(err, &fe) {
		return ExitFindings
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if errors.Is(err, context.Canceled) {
		return ExitInterrupted
	}
	if IsConfigError(err) {
		return ExitUsage
	}
	// Everything else means the cluster could not be evaluated.
	return ExitUnavailable
}

// rank orders exit codes from best to worst.
func rank(code int) int {
	switch code {
	case ExitOK:
		return 0
	case ExitFindings:
		return 1
	case ExitIncomplete:
		return 2
	case ExitUnavailable:
		return 3
	case ExitUsage:
		return 4
	case ExitInterrupted:
		return 5
	default:
		return 3
	}
}

// Worst returns the worst of the given exit codes.
func Worst(codes ...int) int {
	worst := ExitOK
	for _, c := range codes {
		if rank(c) > rank(worst) {
			worst = c
		}
	}
	return worst
}

// IsConfigError reports whether err comes from reading the local kubeconfig
// (missing file, unknown context, no server configured).
func IsConfigError(err error) bool {
	if err == nil {
		return false
	}
	if clientcmd.IsConfigurationInvalid(err) || clientcmd.IsEmptyConfig(err) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{
		"context was not found for specified context",
		"does not exist", // missing kubeconfig file
		"no configuration has been provided",
		"cluster has no server defined",
		"invalid configuration",
	} {
		if strings.Contains(msg, s) && !isNetwork(err) {
			return true
		}
	}
	return false
}

// IsUnavailable reports whether err means the cluster could not be reached or
// refused a required read.
func IsUnavailable(err error) bool {
	return isNetwork(err) || apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) ||
		apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err) || errors.Is(err, context.DeadlineExceeded)
}

func isNetwork(err error) bool {
	var ue *url.Error
	var oe *net.OpError
	return errors.As(err, &ue) || errors.As(err, &oe) || errors.Is(err, syscall.ECONNREFUSED)
}
