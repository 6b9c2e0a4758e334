//go:build e2e

package demoe2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// readmeTranscript returns the abridged transcript README shows under
// "An abridged transcript of a real run": the first ```text block after
// that line.
func readmeTranscript(root string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		return nil, err
	}
	_, rest, ok := strings.Cut(string(b), "An abridged transcript of a real run:")
	if !ok {
		return nil, fmt.Errorf("README.md: no %q", "An abridged transcript of a real run:")
	}
	_, rest, ok = strings.Cut(rest, "```text\n")
	if !ok {
		return nil, fmt.Errorf("README.md: no ```text block after the transcript's heading")
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		return nil, fmt.Errorf("README.md: the transcript's ```text block does not end")
	}
	return strings.Split(strings.TrimRight(block, "\n"), "\n"), nil
}

// volatile are the parts of a transcript line that differ from run to run:
// times, durations, run ids, pod-template hashes, the demo's directory, the
// days left in a support window, a database's share of its quota, and the
// GPU-seconds a plain drain would lose (they grow with the run's length).
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`[0-9]{4}/[0-9]{2}/[0-9]{2} [0-9:.]+`), "TIME"},
	{regexp.MustCompile(`[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z`), "TIME"},
	{runID, "gd-RUN"},
	{regexp.MustCompile(`llm-serve-[0-9a-z]+-[0-9a-z]{5}`), "llm-serve-POD"},
	{regexp.MustCompile(`\b[0-9]+(\.[0-9]+)?(ms|s)\b`), "DUR"},
	{regexp.MustCompile(`\([0-9]+ days\)`), "(N days)"},
	{regexp.MustCompile(`[0-9.]+% of its quota`), "N% of its quota"},
	{regexp.MustCompile(`about [0-9]+ GPU-seconds \([0-9.]+ GPU-h`), "about N GPU-seconds (N GPU-h"},
	{regexp.MustCompile(`\s+`), " "},
}

// servingNode is a GPU node's name in a line about the serving pods: the
// scheduler places llm-serve's replicas on whichever h100-c nodes it
// picks, so README's transcript cannot fix which (one CI run had them on
// h100-c-3 where README shows h100-c-4).
var servingNode = regexp.MustCompile(`h100-c-[0-9]+`)

func normalizeLine(s string) string {
	if strings.Contains(s, "llm-serve") {
		s = servingNode.ReplaceAllString(s, "h100-c-N")
	}
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return strings.TrimSpace(s)
}

// async lines come from the trainer and its agent, which run beside the
// plugin: where they fall among the plugin's own lines is not fixed.
func async(line string) bool {
	return strings.HasPrefix(line, "[agent]") || strings.HasPrefix(line, "[trainer")
}

// transcriptMismatch says which README line a real run's output does not
// show: README's lines must appear in the output in order, section by
// section ("== " headers), with "..." standing for any lines; the trainer's
// and agent's lines only have to appear within their section. README's
// paths are the default DEMO_DIR (.demo); the run's are dir.
func transcriptMismatch(readme []string, out, dir string) string {
	out = strings.ReplaceAll(out, dir, ".demo")
	var got []string
	for _, l := range strings.Split(out, "\n") {
		got = append(got, normalizeLine(strings.ReplaceAll(l, "$PWD/", "")))
	}
	section := func(from int) int { // the index of the next "== " line after from, or len(got)
		for i := from + 1; i < len(got); i++ {
			if strings.HasPrefix(got[i], "== ") {
				return i
			}
		}
		return len(got)
	}
	pos, start := 0, 0
	for n, raw := range readme {
		want := normalizeLine(strings.ReplaceAll(raw, "$PWD/", ""))
		if want == "" || want == "..." {
			continue
		}
		if async(want) {
			found := false
			for i := start; i < section(start) && i < len(got); i++ {
				if got[i] == want {
					found = true
					break
				}
			}
			if !found {
				return fmt.Sprintf("README transcript line %d is not in its section of the run's output: %q", n+1, raw)
			}
			continue
		}
		i := pos
		for ; i < len(got) && got[i] != want; i++ {
		}
		if i == len(got) {
			return fmt.Sprintf("README transcript line %d is not in the run's output after line %d: %q", n+1, pos+1, raw)
		}
		if strings.HasPrefix(want, "== ") {
			start = i
		}
		pos = i + 1
	}
	return ""
}

// README's transcript matches a run whose serving replicas the scheduler
// put on another GPU node, and still fails a run that lost a line.
func TestTranscriptServingNodeVaries(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	lines, err := readmeTranscript(root)
	if err != nil {
		t.Fatal(err)
	}
	// A run whose replicas were on h100-c-3 (a full run here): the nodes
	// drain in name order, so the evictions come between h100-c-3's
	// draining and drained, and h100-c-4 drains after them with nothing on
	// it.
	var moved []string
	n := 0
	for _, l := range lines {
		if strings.TrimSpace(l) == "node h100-c-1: draining" {
			moved = append(moved, l, "  node h100-c-1: drained", "  node h100-c-2: draining", "  node h100-c-2: drained", "  node h100-c-3: draining")
			continue
		}
		if strings.TrimSpace(l) == "node h100-c-4: draining" {
			continue // it comes after h100-c-3's evictions, below
		}
		if strings.Contains(l, "llm-serve") && strings.Contains(l, "h100-c-4") {
			l = strings.ReplaceAll(l, "h100-c-4", "h100-c-3")
			n++
		}
		if strings.TrimSpace(l) == "node h100-c-4: drained" {
			moved = append(moved, "  node h100-c-3: drained", "  node h100-c-4: draining")
		}
		moved = append(moved, l)
	}
	if n == 0 {
		t.Fatal("README's transcript shows no llm-serve pod on h100-c-4; the test no longer tests anything")
	}
	if msg := transcriptMismatch(lines, strings.Join(moved, "\n"), "/nowhere"); msg != "" {
		t.Errorf("the replicas on another node: %s", msg)
	}
	var cut []string
	for _, l := range moved {
		if !strings.Contains(l, "llm-serve") {
			cut = append(cut, l)
		}
	}
	if msg := transcriptMismatch(lines, strings.Join(cut, "\n"), "/nowhere"); msg == "" {
		t.Error("a run without the llm-serve lines matched README")
	}
}
