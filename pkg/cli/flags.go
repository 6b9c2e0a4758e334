package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// Output formats.
const (
	OutputTable = "table"
	OutputWide  = "wide"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
)

// PrintFlags holds the output flags every plugin shares: -o, --no-headers,
// --color and -q.
type PrintFlags struct {
	Output    string
	NoHeaders bool
	Color     string
	Quiet     bool

	formats []string
}

// NewPrintFlags returns print flags accepting the given formats (default:
// table, wide, json, yaml).
func NewPrintFlags(formats ...string) *PrintFlags {
	if len(formats) == 0 {
		formats = []string{OutputTable, OutputWide, OutputJSON, OutputYAML}
	}
	return &PrintFlags{Output: OutputTable, Color: ColorAuto, formats: formats}
}

// AddFlags registers the flags on cmd, with completion for -o and --color.
func (f *PrintFlags) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.Output, "output", "o", f.Output, "Output format: "+strings.Join(f.formats, "|")+".")
	cmd.Flags().BoolVar(&f.NoHeaders, "no-headers", f.NoHeaders, "Do not print table headers (table and wide output only).")
	cmd.Flags().StringVar(&f.Color, "color", f.Color, "Colour status words: auto|always|never. auto colours only on a terminal and honours NO_COLOR.")
	cmd.Flags().BoolVarP(&f.Quiet, "quiet", "q", f.Quiet, "Print nothing on stdout and no progress or warnings; the exit code carries the answer.")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return f.formats, cobra.ShellCompDirectiveNoFileComp
	})
	_ = cmd.RegisterFlagCompletionFunc("color", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{ColorAuto, ColorAlways, ColorNever}, cobra.ShellCompDirectiveNoFileComp
	})
}

// Validate checks the flags without touching the network.
func (f *PrintFlags) Validate() error {
	if f.Output == "" {
		f.Output = OutputTable
	}
	if !slices.Contains(f.formats, f.Output) {
		return fmt.Errorf("unknown output format %q: want one of %s", f.Output, strings.Join(f.formats, ", "))
	}
	switch f.Color {
	case ColorAuto, ColorAlways, ColorNever:
	default:
		return fmt.Errorf("unknown --color value %q: want auto, always or never", f.Color)
	}
	if f.Structured() {
		if f.NoHeaders {
			return fmt.Errorf("--no-headers has no effect with -o %s", f.Output)
		}
		if f.Quiet {
			return fmt.Errorf("--quiet cannot be combined with -o %s", f.Output)
		}
	}
	return nil
}

// Structured reports whether the output is JSON or YAML.
func (f *PrintFlags) Structured() bool {
	return f.Output == OutputJSON || f.Output == OutputYAML
}

// TableOptions returns the table options these flags ask for.
func (f *PrintFlags) TableOptions() TableOptions {
	return TableOptions{NoHeaders: f.NoHeaders, Wide: f.Output == OutputWide}
}

// Severity orders findings for --fail-on.
type Severity int

// Severities, least to most severe.
const (
	SeverityNone Severity = iota
	SeverityInfo
	SeverityWarning
	SeverityBlocking
)

// String returns the lower-case name used in flags and reports.
func (s Severity) String() string {
	switch s {
	case SeverityInfo:
		return "info"
	case SeverityWarning:
		return "warning"
	case SeverityBlocking:
		return "blocking"
	default:
		return "none"
	}
}

// MarshalText makes severities print by name in JSON and YAML.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a severity by name.
func (s *Severity) UnmarshalText(b []byte) error {
	v, err := ParseSeverity(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseSeverity parses info, warning or blocking.
func ParseSeverity(s string) (Severity, error) {
	switch strings.ToLower(s) {
	case "info":
		return SeverityInfo, nil
	case "warning", "warn":
		return SeverityWarning, nil
	case "blocking", "block":
		return SeverityBlocking, nil
	case "none", "":
		return SeverityNone, nil
	}
	return SeverityNone, fmt.Errorf("unknown severity %q: want info, warning or blocking", s)
}

// FailOnFlag is --fail-on for the checking plugins: findings at or above the
// level turn into exit code 1.
type FailOnFlag struct {
	Value string
	Level Severity
}

// NewFailOnFlag returns the flag with the default level, blocking.
func NewFailOnFlag() *FailOnFlag { return &FailOnFlag{Value: "blocking"} }

// AddFlags registers --fail-on.
func (f *FailOnFlag) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.Value, "fail-on", f.Value, "Lowest finding severity that makes the command exit 1: info|warning|blocking.")
	_ = cmd.RegisterFlagCompletionFunc("fail-on", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"info", "warning", "blocking"}, cobra.ShellCompDirectiveNoFileComp
	})
}

// Validate parses the flag value.
func (f *FailOnFlag) Validate() error {
	l, err := ParseSeverity(f.Value)
	if err != nil || l == SeverityNone {
		return fmt.Errorf("unknown --fail-on value %q: want info, warning or blocking", f.Value)
	}
	f.Level = l
	return nil
}

// Count returns how many of the given severities are at or above the level.
func (f *FailOnFlag) Count(severities ...Severity) int {
	n := 0
	for _, s := range severities {
		if s != SeverityNone && s >= f.Level {
			n++
		}
	}
	return n
}

// Colorizer returns the colorizer for output written to w, decided from
// --color, NO_COLOR, TERM and whether w is a terminal.
func (f *PrintFlags) Colorizer(w io.Writer) Colorizer {
	return Colorizer{Enabled: UseColor(f.Color, nil, IsTerminal(w))}
}

// PrintSummary writes a report's summary lines the one way every plugin
// does: on stdout (w), under the table after a blank line when a table
// came before, and not at all with -q, --no-headers (so that the rows
// alone reach awk) or -o json|yaml (whose summary is in the report).
// Notes and warnings are not summaries: they go to stderr.
func (f *PrintFlags) PrintSummary(w io.Writer, afterTable bool, lines ...string) error {
	if f.Quiet || f.NoHeaders || f.Structured() || len(lines) == 0 {
		return nil
	}
	var b strings.Builder
	if afterTable {
		b.WriteByte('\n')
	}
	width := max(DefaultTableWidth, terminalWidth(w))
	for _, l := range lines {
		for _, part := range WrapSummary(l, width) {
			b.WriteString(part)
			b.WriteByte('\n')
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WrapSummary breaks a summary line longer than width: after the last
// "; " that fits, else at the last space, the lines after the first
// indented by two spaces. A word longer than the width stays whole.
func WrapSummary(line string, width int) []string {
	var out []string
	indent := ""
	for len(indent)+len(line) > width {
		room := width - len(indent)
		cut := strings.LastIndex(line[:room], "; ")
		skip := 2
		if cut <= 0 {
			cut, skip = strings.LastIndex(line[:room+1], " "), 1
		}
		if cut <= 0 {
			cut = strings.Index(line, " ")
		}
		if cut <= 0 {
			break
		}
		out = append(out, indent+strings.TrimRight(line[:cut+skip-1], " "))
		line = strings.TrimLeft(line[cut+skip:], " ")
		indent = "  "
	}
	return append(out, indent+line)
}

// AddTargetFlag registers --target, the release a command judges or plans
// against, in every plugin; --target-version, its older name, stays as a
// hidden alias so that saved runbooks keep working.
func AddTargetFlag(cmd *cobra.Command, v *string, usage string, complete []string) {
	cmd.Flags().StringVar(v, "target", *v, usage)
	cmd.Flags().StringVar(v, "target-version", *v, "Alias of --target.")
	_ = cmd.Flags().MarkHidden("target-version")
	for _, name := range []string{"target", "target-version"} {
		_ = cmd.RegisterFlagCompletionFunc(name, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return complete, cobra.ShellCompDirectiveNoFileComp
		})
	}
}
