package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// Status is a word of a table's STATUS column. Every plugin prints the
// same closed set, each word with one meaning, so that a user (or awk)
// reads one vocabulary across the suite. A report's -o json and -o yaml
// carry the same word in lower case (JSONWord): every enum the suite
// defines is lower case in JSON, as most reports already had it (skew's
// statuses, every severity, gpu-validate's levels).
type Status string

// The status words, from good to bad.
const (
	StatusOK      Status = "OK"
	StatusDone    Status = "DONE"
	StatusSkip    Status = "SKIP"
	StatusInfo    Status = "INFO"
	StatusWarn    Status = "WARN"
	StatusWait    Status = "WAIT"
	StatusUnknown Status = "UNKNOWN"
	StatusBlocked Status = "BLOCKED"
	StatusFail    Status = "FAIL"
	StatusError   Status = "ERROR"
)

// statusMeanings is the closed set, in the order legends list it.
var statusMeanings = []struct {
	word    Status
	meaning string
}{
	{StatusOK, "nothing to do: checked and fine"},
	{StatusDone, "the command made the change and it took"},
	{StatusSkip, "not checked or not acted on, by design or by a flag"},
	{StatusInfo, "worth knowing; needs no action"},
	{StatusWarn, "needs attention or a change before the upgrade; not yet broken"},
	{StatusWait, "will clear by itself: the step waits (a budget, a replacement, an approval)"},
	{StatusUnknown, "could not be determined: a version, source or answer was missing"},
	{StatusBlocked, "cannot proceed until someone acts (see the fix)"},
	{StatusFail, "checked and wrong: outside the policy, removed, or a failed test"},
	{StatusError, "the command could not finish this row (an API or I/O error)"},
}

// StatusColumn is the name of every table's status column.
const StatusColumn = "STATUS"

// EmptyCell is what a table shows for an empty cell.
const EmptyCell = "-"

// Statuses are the status words, in legend order.
func Statuses() []Status {
	out := make([]Status, len(statusMeanings))
	for i, m := range statusMeanings {
		out[i] = m.word
	}
	return out
}

// Valid reports whether s is one of the status words.
func (s Status) Valid() bool { return s.Meaning() != "" }

// Meaning is the one-line meaning of s, "" for a word outside the set.
func (s Status) Meaning() string {
	for _, m := range statusMeanings {
		if m.word == s {
			return m.meaning
		}
	}
	return ""
}

// String is the word.
func (s Status) String() string { return string(s) }

// JSONWord is the word as -o json and -o yaml write it: lower case ("ok",
// "warn", "blocked"), the one casing of the suite's JSON enums.
func (s Status) JSONWord() string { return strings.ToLower(string(s)) }

// ParseStatus reads a status word in either spelling (the table's "WARN"
// or JSON's "warn"); ok is false for a word outside the closed set.
func ParseStatus(word string) (Status, bool) {
	s := Status(strings.ToUpper(word))
	return s, s.Valid()
}

// JSONStatuses are the status words as JSON writes them, in legend order:
// the enum of every report's status field.
func JSONStatuses() []string {
	out := make([]string, len(statusMeanings))
	for i, m := range statusMeanings {
		out[i] = m.word.JSONWord()
	}
	return out
}

// StatusLegend is the legend of the status words a command can print, in
// the set's order: a heading and one line per word. It panics on a word
// outside the set, so that a command cannot document one.
func StatusLegend(words ...Status) string {
	var b strings.Builder
	b.WriteString("Status words (the " + StatusColumn + " column):\n")
	for _, m := range statusMeanings {
		if slices.Contains(words, m.word) {
			fmt.Fprintf(&b, "  %-8s %s\n", m.word, m.meaning)
		}
	}
	for _, w := range words {
		if !w.Valid() {
			panic(fmt.Sprintf("status word %q is not in the closed set", w))
		}
	}
	return b.String()
}

// StatusWordsAnnotation is the cobra annotation that lists the status
// words a command can print, comma-separated.
const StatusWordsAnnotation = "gpufleet.dev/status-words"

// SetStatusWords records the status words cmd's tables can print and
// appends their legend to its --help (the Long text).
func SetStatusWords(cmd *cobra.Command, words ...Status) {
	legend := StatusLegend(words...)
	names := make([]string, len(words))
	for i, w := range words {
		names[i] = string(w)
	}
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[StatusWordsAnnotation] = strings.Join(names, ",")
	long := strings.TrimRight(cmd.Long, "\n")
	if long == "" {
		long = cmd.Short
	}
	cmd.Long = long + "\n\n" + strings.TrimRight(legend, "\n")
}

// StatusWords are the status words recorded on cmd by SetStatusWords.
func StatusWords(cmd *cobra.Command) []Status {
	v := cmd.Annotations[StatusWordsAnnotation]
	if v == "" {
		return nil
	}
	var out []Status
	for _, w := range strings.Split(v, ",") {
		out = append(out, Status(w))
	}
	return out
}

// ReadEnumWord reads a report's enum value as this release writes it, the
// JSON word word(v) of one of values, or as an earlier apiVersion did, the
// value's own spelling string(v), so that a report or baseline saved by an
// earlier release still loads. "" reads as the zero value (an omitted
// field). Anything else is refused naming the words this release writes.
func ReadEnumWord[T ~string](b []byte, values []T, word func(T) string) (T, error) {
	w := string(b)
	if w == "" {
		return "", nil
	}
	words := make([]string, len(values))
	for i, v := range values {
		if w == word(v) || w == string(v) {
			return v, nil
		}
		words[i] = word(v)
	}
	var zero T
	return zero, fmt.Errorf("%q is not one of %s", w, strings.Join(words, ", "))
}
