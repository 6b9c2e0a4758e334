package main

import (
	"fmt"
	"strings"
)

// Plugin names one plugin of the suite.
type Plugin struct {
	Name string // the kubectl command and krew name, e.g. gang-drain
}

// Binary is the executable name kubectl finds on PATH.
func (p Plugin) Binary() string { return "kubectl-" + strings.ReplaceAll(p.Name, "-", "_") }

// Completion is the script kubectl runs to complete `kubectl <name> <TAB>`.
func (p Plugin) Completion() string {
	return "kubectl_complete-" + strings.ReplaceAll(p.Name, "-", "_")
}

// Plugins are the six plugins of the suite.
var Plugins = []Plugin{
	{"skew"}, {"deprecations"}, {"gang-drain"}, {"gpu-validate"}, {"pdb-blockers"}, {"crd-migrate"},
}

// Platform is one os/arch pair we ship.
type Platform struct {
	OS, Arch string
}

// Platforms are the release platforms.
var Platforms = []Platform{
	{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"},
}

// Completion is the completion script the platform's archive ships for
// pl, "" for none. kubectl finds a plugin's completion script with
// exec.LookPath("kubectl_complete-<name>") and runs it
// (k8s.io/kubectl@v0.37.2 pkg/cmd/plugin/plugin_completion.go,
// lookupCompletionExec); on Windows LookPath finds only names ending in an
// extension of PATHEXT (https://pkg.go.dev/os/exec#LookPath), and the
// script is sh, which Windows cannot run, so Windows gets none.
func (p Platform) Completion(pl Plugin) string {
	if p.OS == "windows" {
		return ""
	}
	return pl.Completion()
}

// Ext is the archive extension for the platform.
func (p Platform) Ext() string {
	if p.OS == "windows" {
		return ".zip"
	}
	return ".tar.gz"
}

// Exe is the executable suffix for the platform.
func (p Platform) Exe() string {
	if p.OS == "windows" {
		return ".exe"
	}
	return ""
}

// ArchiveName is the archive file name of a plugin for a platform.
func ArchiveName(pl Plugin, version string, p Platform) string {
	return pl.Binary() + "_" + version + "_" + p.OS + "_" + p.Arch + p.Ext()
}

// selectPlatforms parses a comma-separated os/arch list; empty means all.
func selectPlatforms(list string) ([]Platform, error) {
	if list == "" {
		return Platforms, nil
	}
	var out []Platform
	for _, s := range strings.Split(list, ",") {
		os, arch, ok := strings.Cut(strings.TrimSpace(s), "/")
		if !ok {
			return nil, fmt.Errorf("platform %q is not os/arch", s)
		}
		out = append(out, Platform{os, arch})
	}
	return out, nil
}
