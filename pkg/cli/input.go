package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// InputErr marks err as a local input that could not be read (exit 3, as
// a cluster that could not be evaluated: either way the answer would be
// incomplete): a file or directory named by a flag that does not exist,
// cannot be read, or holds nothing the command can read. The error names
// the flag and the path; a decoder's own text in it is cut to its cause
// (DecodeCause).
func InputErr(err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: ExitUnavailable, Err: inputError{err}}
}

// IsInputErr reports whether err is an input refused by InputErr.
func IsInputErr(err error) bool {
	var ie inputError
	return errors.As(err, &ie)
}

// inputError is an input error in the suite's words: its text without a
// decoder's prefixes, its chain kept for errors.As.
type inputError struct{ err error }

func (e inputError) Error() string { return DecodeCause(e.err.Error()) }
func (e inputError) Unwrap() error { return e.err }

// InputFileErr is the error of a file a flag names that could not be
// read or is not what the flag takes: "FLAG PATH: cause", exit 3. A
// decoder's own text ("error unmarshaling JSON: while decoding JSON:
// json: ...") is cut to its cause.
func InputFileErr(flag, path string, err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			err = errors.New("does not exist")
		case errors.Is(err, fs.ErrPermission):
			err = errors.New("cannot be read: permission denied")
		default:
			err = fmt.Errorf("cannot be read: %v", pe.Err)
		}
	}
	if path == "-" {
		path = "- (stdin)"
	}
	return InputErr(fmt.Errorf("%s %s: %w", flag, path, err))
}

// ErrEmptyInput is the cause of a file that holds nothing to read.
var ErrEmptyInput = errors.New("holds nothing to read (0 bytes besides white space)")

// ReadInputFile reads the file a flag names, refusing (InputFileErr, exit
// 3) one that does not exist, cannot be read, or is empty.
func ReadInputFile(flag, path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, InputFileErr(flag, path, err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, InputFileErr(flag, path, ErrEmptyInput)
	}
	return data, nil
}

// decoderPrefixes are the library prefixes of YAML and JSON decoding
// errors (sigs.k8s.io/yaml, encoding/json, go-yaml) that say how a file
// was read, not what is wrong with it.
var decoderPrefixes = []string{
	"error unmarshaling JSON: ",
	"while decoding JSON: ",
	"error converting YAML to JSON: ",
	"json: ",
	"yaml: ",
}

// DecodeCause cuts the library prefixes from a decoding error's text
// anywhere in msg, keeping what it says is wrong ("unknown field
// \"apiVersion\"", "line 2: did not find expected node content").
func DecodeCause(msg string) string {
	for changed := true; changed; {
		changed = false
		for _, p := range decoderPrefixes {
			// A prefix starts the text or follows a space or "(":
			// "deploy.yaml: " is a file name, not go-yaml.
			for from := 0; ; {
				i := strings.Index(msg[from:], p)
				if i < 0 {
					break
				}
				i += from
				if i == 0 || msg[i-1] == ' ' || msg[i-1] == '(' {
					msg = msg[:i] + msg[i+len(p):]
					changed = true
					break
				}
				from = i + 1
			}
		}
	}
	// encoding/json names Go types: say what the file holds instead.
	msg = goType.ReplaceAllStringFunc(msg, func(m string) string {
		g := goType.FindStringSubmatch(m)
		if g[2] != "" {
			return "field " + g[2] + ": " + article(g[1]) + " where another type belongs"
		}
		return article(g[1]) + " where another type belongs"
	})
	return msg
}

// goType matches encoding/json's type error: "cannot unmarshal object into
// Go value of type []health.PromQLCheck", "... into Go struct field
// Calendar.releases of type ...".
var goType = regexp.MustCompile(`cannot unmarshal (\w+) into Go (?:struct field (?:\w+\.)*(\w+)|value) of type \S+`)

// article is "an object", "a string".
func article(word string) string {
	if strings.ContainsRune("aeiou", rune(word[0])) {
		return "an " + word
	}
	return "a " + word
}

// OutputFileAnnotation marks a flag that names a file the command writes
// (--save): it takes a filename, yet is no input.
const OutputFileAnnotation = "gpufleet.dev/output-file"

// MarkOutputFile marks flag name of cmd as a file the command writes.
func MarkOutputFile(cmd *cobra.Command, name string) {
	_ = cmd.Flags().SetAnnotation(name, OutputFileAnnotation, []string{"true"})
}

// InputFileFlags are the flags of cmd that name a file it reads: those
// marked as filenames (cobra's MarkFlagFilename, for completion) and not
// as output files; the kubeconfig is local configuration (exit 2), not
// input.
func InputFileFlags(cmd *cobra.Command) []*pflag.Flag {
	var out []*pflag.Flag
	seen := map[string]bool{}
	add := func(f *pflag.Flag) {
		if seen[f.Name] || f.Name == "kubeconfig" {
			return
		}
		if _, ok := f.Annotations[cobra.BashCompFilenameExt]; !ok {
			return
		}
		if _, ok := f.Annotations[OutputFileAnnotation]; ok {
			return
		}
		seen[f.Name] = true
		out = append(out, f)
	}
	cmd.LocalFlags().VisitAll(add)
	cmd.InheritedFlags().VisitAll(add)
	return out
}
