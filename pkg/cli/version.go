package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Set at link time with -ldflags "-X github.com/gpufleet/upgrade-plugins/pkg/cli.version=...".
var (
	version = ""
	commit  = ""
)

// VersionInfo is what `version` prints.
type VersionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// GetVersion returns the build's version, falling back to the module build
// information for `go install` builds.
func GetVersion() VersionInfo {
	v := VersionInfo{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && v.Commit == "" {
				v.Commit = s.Value
			}
		}
	}
	if v.Version == "" {
		v.Version = "v0.0.0-dev"
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	return v
}

// NewVersionCmd returns the `version` subcommand.
func NewVersionCmd(streams genericiooptions.IOStreams) *cobra.Command {
	output := ""
	cmd := &cobra.Command{
		Use:         "version",
		Short:       "Print the plugin's version",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{OfflineAnnotation: "true"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := GetVersion()
			switch output {
			case "":
				fmt.Fprintf(streams.Out, "%s %s (commit %s, %s, %s)\n", cmd.Root().Name(), v.Version, v.Commit, v.GoVersion, v.Platform)
				return nil
			case OutputJSON, OutputYAML:
				return PrintStructured(streams.Out, output, v)
			}
			return Usagef("unknown output format %q: want json or yaml", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", output, "Output format: json|yaml (default: one line).")
	return cmd
}
