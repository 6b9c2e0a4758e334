package gangdrain

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// README's inference plan is the transcript e2e/gangdrain
// TestInferencePoolPacedVersusPDBOnly writes (the namespace's generated
// suffix masked there), byte for byte, so the README shows what
// `gang-drain plan --inference` prints.
func TestReadmeInferencePlanIsGolden(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.ReadFile(filepath.Join("..", "..", "e2e", "gangdrain", "testdata", "inference-plan.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```text\n"+string(g)+"```\n") {
		t.Error("README.md's inference plan differs from e2e/gangdrain/testdata/inference-plan.txt: copy the golden file into it")
	}
}
