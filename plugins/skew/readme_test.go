package skew

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// README's examples must work as written when pasted: a command that exits
// 1 on findings is never followed by && (outside the runbook copy, whose
// gates are chained with && on purpose: a failed gate stops what it
// allows), --audit-log is never given a bare
// glob (the shell splits it into arguments the flag does not take), and a
// file name is used for one report kind only.
func TestREADMEExamplesAsWritten(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Skip("README.md not found")
	}
	readme := string(data)
	andAfterFindings := regexp.MustCompile(`kubectl (skew|deprecations|pdb-blockers|gpu-validate|crd-migrate status)[^&|;#\n]*&&`)
	runbook := regexp.MustCompile("(?s)\n````markdown\n.*?\n````\n")
	for _, m := range andAfterFindings.FindAllString(runbook.ReplaceAllString(readme, "\n"), -1) {
		t.Errorf("README: %q: the command exits 1 on findings, so && skips what follows; use ; or a separate line", m)
	}
	globFlag := regexp.MustCompile(`--audit-log[ =][^ '"\n]*[*?]`)
	for _, m := range globFlag.FindAllString(readme, -1) {
		t.Errorf("README: %q: the shell expands the glob into extra arguments; repeat --audit-log or pipe through --audit-log -", m)
	}
	kinds := map[string]string{}
	use := func(file, kind string) {
		if k, ok := kinds[file]; ok && k != kind {
			t.Errorf("README: %s holds a %s in one example and a %s in another", file, k, kind)
		}
		kinds[file] = kind
	}
	for _, m := range regexp.MustCompile(`kubectl skew -o yaml > (\S+)`).FindAllStringSubmatch(readme, -1) {
		use(m[1], "SkewReport")
	}
	for _, m := range regexp.MustCompile(`kubectl skew plan -f (\S+)`).FindAllStringSubmatch(readme, -1) {
		use(m[1], "SkewReport")
	}
	for _, m := range regexp.MustCompile(`skew preflight [^\n]*--save (\S+)`).FindAllStringSubmatch(readme, -1) {
		use(strings.TrimSuffix(m[1], "`"), "PreflightReport")
	}
	for _, m := range regexp.MustCompile(`skew verify --baseline (\S+)`).FindAllStringSubmatch(readme, -1) {
		use(strings.TrimSuffix(m[1], "`"), "PreflightReport")
	}
}

// README's run by hand of the fleet programme is the transcript e2e/fleet
// TestFleetByHand writes, byte for byte, so the README shows what the
// commands print.
func TestReadmeFleetByHandIsGolden(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.ReadFile(filepath.Join("..", "..", "e2e", "fleet", "testdata", "byhand-transcript.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```console\n"+string(g)+"```\n") {
		t.Error("README.md's run by hand differs from e2e/fleet/testdata/byhand-transcript.txt: copy the golden file into it")
	}
}

// README's verify transcript is the golden file of TestVerifyTableFits,
// byte for byte, so the README shows what verify prints.
func TestReadmeVerifyIsGolden(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.ReadFile(filepath.Join("testdata", "verify.table.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```\n$ kubectl skew verify --baseline preflight-1.38.yaml\n"+string(g)+"$ echo $?\n1\n```\n") {
		t.Error("README.md's verify transcript differs from plugins/skew/testdata/verify.table.golden: copy the golden file into it")
	}
}
