package cli

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
)

// Kubeconfig problems are said in the same words by every plugin and
// subcommand, whichever part of client-go found them first.

// unknownContextRE matches client-go's two wordings of a context the
// kubeconfig does not have.
var unknownContextRE = regexp.MustCompile(`context "?([^"\s]+)"? does not exist|context was not found for specified context: (\S+)`)

// ContextHint is the hint of an unknown context.
const ContextHint = "kubectl config get-contexts -o name"

// UnknownContextErr is the usage error of a context the kubeconfig does
// not have.
func UnknownContextErr(name string) error {
	return WithHint(Usagef("context %q is not in the kubeconfig", name), ContextHint)
}

// KubeconfigErr turns an error from reading the kubeconfig into the
// suite's usage error (exit 2): an unknown context in one wording with the
// command that lists the contexts, anything else as "reading kubeconfig:
// <cause>" with the command that shows what kubectl reads.
func KubeconfigErr(err error) error {
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) && ee.Code == ExitUsage && ee.Hint != "" {
		return err
	}
	if m := unknownContextRE.FindStringSubmatch(err.Error()); m != nil {
		name := m[1]
		if name == "" {
			name = m[2]
		}
		return UnknownContextErr(name)
	}
	msg := strings.TrimPrefix(err.Error(), "reading kubeconfig: ")
	if strings.HasPrefix(msg, "Invalid timeout value") {
		// client-go checks --request-timeout while it builds the config.
		return Usagef("--request-timeout: want a duration such as 30s or 2m, a whole number of seconds, or 0 for none")
	}
	return WithHint(Usagef("reading kubeconfig: %s", msg), "kubectl config view")
}

// checkKubeconfigEnv refuses a KUBECONFIG that names only files that do
// not exist. client-go skips missing files in KUBECONFIG and, finding no
// cluster, falls back to http://localhost:8080, so the mistake would be
// reported as an unreachable server (exit 3) where the same missing file
// given to --kubeconfig is a usage error (exit 2).
func checkKubeconfigEnv() error {
	env, ok := os.LookupEnv(clientcmd.RecommendedConfigPathEnvVar)
	if !ok || strings.TrimSpace(env) == "" {
		return nil
	}
	paths := filepath.SplitList(env)
	for _, p := range paths {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return nil
		}
	}
	return WithHint(Usagef("reading kubeconfig: KUBECONFIG=%s names no file that exists", env), "echo $KUBECONFIG; kubectl config view")
}

// CheckKubeconfigFlags reads the kubeconfig when --kubeconfig or --context
// was given on the command line, so that a missing or unparsable file and
// an unknown context are usage errors (exit 2) in the same words for every
// command, including those that would not otherwise read it. `version`,
// `help` and shell completion never read it.
func CheckKubeconfigFlags(cmd *cobra.Command) error {
	switch cmd.Name() {
	case "version", "help", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
		return nil
	}
	kf, cf := cmd.Flags().Lookup("kubeconfig"), cmd.Flags().Lookup("context")
	if kf == nil || cf == nil {
		return nil
	}
	// A command given files (-f) works from them, offline: a kubeconfig it
	// does not read is not its error.
	for _, name := range []string{"filename", "from-file"} {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			return nil
		}
	}
	// A command that never reaches a cluster (the calendar, the tables)
	// does not read the kubeconfig KUBECONFIG names: a missing one is not
	// its error. A --kubeconfig or --context given to it is still checked.
	if cmd.Annotations[OfflineAnnotation] != "" && !kf.Changed && !cf.Changed {
		return nil
	}
	if !kf.Changed {
		if err := checkKubeconfigEnv(); err != nil {
			return err
		}
	}
	if !kf.Changed && !cf.Changed {
		return nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kf.Value.String()
	cfg, err := rules.Load()
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && kf.Changed {
			return WithHint(Usagef("reading kubeconfig %s: %v", pe.Path, pe.Err), "kubectl config view --kubeconfig "+pe.Path)
		}
		hint := "kubectl config view"
		if kf.Changed {
			hint += " --kubeconfig " + kf.Value.String()
		}
		return WithHint(Usagef("reading kubeconfig: %s", oneLine(err.Error())), hint)
	}
	if name := cf.Value.String(); cf.Changed && name != "" {
		if _, ok := cfg.Contexts[name]; !ok {
			hint := ContextHint
			if kf.Changed {
				hint += " --kubeconfig " + kf.Value.String()
			}
			return WithHint(Usagef("context %q is not in the kubeconfig", name), hint)
		}
	}
	return nil
}
