package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Dry-run strategies, kubectl's values of --dry-run.
const (
	DryRunNone   = "none"
	DryRunClient = "client"
	DryRunServer = "server"
)

// DryRunFlag is --dry-run as kubectl has it: none (the default), client or
// server; a bare --dry-run means client, and the true and false of older
// scripts mean client and none. Each command states what client and
// server do for it; a command without a server-side dry run says why, and
// --dry-run=server is then a usage error that says so.
type DryRunFlag struct {
	Value string
	// Client says what --dry-run=client does.
	Client string
	// Server says what --dry-run=server does; NoServer says why there is
	// none (one of the two is set).
	Server, NoServer string

	strategy string
}

// AddFlags registers --dry-run.
func (f *DryRunFlag) AddFlags(cmd *cobra.Command) {
	if f.Value == "" {
		f.Value = DryRunNone
	}
	usage := "Dry run: none (the default: do it), client (" + f.Client + ")"
	if f.Server != "" {
		usage += " or server (" + f.Server + ")"
	} else {
		usage += "; server is not offered: " + f.NoServer
	}
	cmd.Flags().StringVar(&f.Value, "dry-run", f.Value, usage+". A bare --dry-run means client.")
	cmd.Flags().Lookup("dry-run").NoOptDefVal = DryRunClient
	_ = cmd.RegisterFlagCompletionFunc("dry-run", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		if f.Server == "" {
			return []string{DryRunNone, DryRunClient}, cobra.ShellCompDirectiveNoFileComp
		}
		return []string{DryRunNone, DryRunClient, DryRunServer}, cobra.ShellCompDirectiveNoFileComp
	})
}

// Validate reads the value; call it from the command's Validate.
func (f *DryRunFlag) Validate() error {
	switch v := strings.ToLower(strings.TrimSpace(f.Value)); v {
	case "", DryRunNone, "false":
		f.strategy = DryRunNone
	case DryRunClient, "true":
		f.strategy = DryRunClient
	case DryRunServer:
		if f.Server == "" {
			return fmt.Errorf("--dry-run=server is not offered here: %s; --dry-run=client %s", f.NoServer, f.Client)
		}
		f.strategy = DryRunServer
	default:
		want := "none, client or server"
		if f.Server == "" {
			want = "none or client"
		}
		return fmt.Errorf("unknown --dry-run value %q: want %s", f.Value, want)
	}
	return nil
}

// Strategy is none, client or server (after Validate).
func (f *DryRunFlag) Strategy() string {
	if f.strategy == "" {
		return DryRunNone
	}
	return f.strategy
}

// Enabled reports a client or server dry run.
func (f *DryRunFlag) Enabled() bool { return f.Strategy() != DryRunNone }
