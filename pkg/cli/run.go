package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"

	"github.com/gpufleet/upgrade-plugins/pkg/logredact"
)

// Setup applies the suite's conventions to a plugin's root command:
// errors are printed once by Run, usage only for bad input, every --help
// ends with the exit-code table, flag errors are usage errors (exit 2),
// klog's flags are hidden except -v, and a version subcommand is added.
func Setup(root *cobra.Command, streams genericiooptions.IOStreams) {
	root.SilenceErrors = true
	// Bad input gets one error line and a hint to --help, never a usage dump
	// on stdout where a script expects a report.
	root.SilenceUsage = true
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(NewVersionCmd(streams))
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error { return CheckKubeconfigFlags(cmd) }
	root.CompletionOptions.HiddenDefaultCmd = true

	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "true")
	klog.SetOutput(streams.ErrOut)
	if v := fs.Lookup("v"); v != nil {
		root.PersistentFlags().AddGoFlag(v)
		root.PersistentFlags().Lookup("v").Usage = "Log level for client-side detail (klog); 4 and above also prints error details."
	}

	walk(root, func(c *cobra.Command) {
		if c.Args != nil {
			args := c.Args
			c.Args = func(cmd *cobra.Command, a []string) error { return UsageErr(args(cmd, a)) }
		}
		if !strings.Contains(c.Long, "Exit codes:") {
			if c.Long == "" {
				c.Long = c.Short
			}
			c.Long = strings.TrimRight(c.Long, "\n") + "\n\n" + ExitCodesFor(c)
		}
	})
}

func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, s := range c.Commands() {
		walk(s, fn)
	}
}

// Run executes the command, prints an error once as
// "error: <what>: <cause>" (plus "hint: ..." where there is one) and returns
// the exit code. It never panics on a plugin's behalf: a panic is reported as
// an internal error with exit code 3.
func Run(ctx context.Context, cmd *cobra.Command, streams genericiooptions.IOStreams) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(streams.ErrOut, "error: internal error: %v\nhint: rerun with -v=4 and report this\n", r)
			code = ExitUnavailable
		}
	}()
	defer startProfile(streams.ErrOut)()
	// Request and response bodies can hold Secret data: -v logs requests
	// without them.
	failed, err := cmd.ExecuteContextC(logredact.Context(ctx))
	if err == nil {
		return ExitOK
	}
	if failed == nil {
		failed = cmd
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// A plugin that stopped cleanly on Ctrl-C may say it is resumable.
		var ee *ExitError
		if errors.As(err, &ee) && ee.Code == ExitIncomplete {
			printError(streams.ErrOut, failed, err)
			return ExitInterrupted
		}
		fmt.Fprintln(streams.ErrOut, "interrupted")
		return ExitInterrupted
	}
	code = ExitCode(err)
	if isCobraUsageError(err) {
		code = ExitUsage
	}
	var fe *FindingsError
	var ee *ExitError
	if !errors.As(err, &fe) && (!errors.As(err, &ee) || ee.Err != nil) {
		printError(streams.ErrOut, failed, err)
	}
	return code
}

// NoDryRunAnnotation, on a command that changes something yet has no
// --dry-run, says why, for the error a --dry-run given to it gets.
const NoDryRunAnnotation = "gpufleet.dev/no-dry-run"

// flagError makes a flag error a usage error (exit 2). A --dry-run given
// to a command that only reads says so rather than only "unknown flag".
func flagError(cmd *cobra.Command, err error) error {
	if strings.HasPrefix(err.Error(), "unknown flag: --dry-run") {
		if why := cmd.Annotations[NoDryRunAnnotation]; why != "" {
			err = fmt.Errorf("%w: %s has no --dry-run: %s", err, cmd.CommandPath(), why)
		} else {
			err = fmt.Errorf("%w: %s only reads and changes nothing, so it has no --dry-run", err, cmd.CommandPath())
		}
	}
	if msg := err.Error(); msg == "unknown shorthand flag: 'n' in -n" || strings.HasPrefix(msg, "unknown flag: --namespace") ||
		strings.HasPrefix(msg, "unknown shorthand flag: 'n' in -n") {
		err = fmt.Errorf("%s has no -n/--namespace: it works cluster-wide", cmd.CommandPath())
	}
	return UsageErr(err)
}

// isCobraUsageError recognises errors cobra returns before any RunE runs.
func isCobraUsageError(err error) bool {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code == ExitUsage
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "unknown flag") ||
		strings.HasPrefix(msg, "unknown shorthand flag") || strings.Contains(msg, "flag needs an argument") ||
		strings.HasPrefix(msg, "required flag") || strings.HasPrefix(msg, "invalid argument")
}

// printError writes err on one line, and its hint: the one it carries, or
// for a usage error the --help of the command that failed (a subcommand's
// own, not the plugin's).
func printError(w io.Writer, cmd *cobra.Command, err error) {
	color := UseColor(colorFlag(cmd), nil, IsTerminal(w))
	c := Colorizer{Enabled: color}
	msg := err.Error()
	if !strings.HasPrefix(msg, "error: ") {
		msg = "error: " + msg
	}
	msg = strings.Replace(msg, "error:", c.Red("error:"), 1)
	fmt.Fprintln(w, oneLine(msg))
	var ee *ExitError
	if errors.As(err, &ee) && ee.Hint != "" {
		fmt.Fprintf(w, "hint: %s\n", ee.Hint)
	} else if ExitCode(err) == ExitUsage && isCobraUsageError(err) {
		fmt.Fprintf(w, "hint: %s --help\n", cmd.CommandPath())
	}
	if klog.V(4).Enabled() {
		fmt.Fprintf(w, "detail: %+v\n", err)
	}
}

// oneLine keeps an error on one line: multi-line causes are joined with "; ".
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	parts := strings.Split(s, "\n")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return strings.Join(parts, "; ")
}

func colorFlag(cmd *cobra.Command) string {
	if f := cmd.Flags().Lookup("color"); f != nil {
		return f.Value.String()
	}
	return ColorAuto
}

// ProfileEnv names a file that, when set, receives a pprof CPU profile of
// the whole run (decoding, computing and printing), for finding where a
// plugin's time goes on a real cluster: go tool pprof BINARY FILE.
const ProfileEnv = "GPUFLEET_CPUPROFILE"

// startProfile starts the CPU profile ProfileEnv asks for and returns the
// function that ends it; a profile that cannot be written is reported and
// the run goes on without it.
func startProfile(errOut io.Writer) (stop func()) {
	path := os.Getenv(ProfileEnv)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(errOut, "Warning: %s: no CPU profile: %v\n", ProfileEnv, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(errOut, "Warning: %s: %v\n", ProfileEnv, err)
		}
	}
}
