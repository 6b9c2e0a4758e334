// Command validate checks rendered Argo Workflows objects with Argo's own
// validation package (github.com/argoproj/argo-workflows/v3/workflow/validate,
// the code the Argo server and CLI lint with), so the fleet programme's
// rendered templates are held to what the controller accepts, not to a
// copy of its rules.
//
//	validate FILE...   (multi-document YAML; "-" reads stdin)
//
// Every WorkflowTemplate and Workflow is decoded strictly (an unknown field
// is an error: the controller would drop it silently) and validated;
// templateRefs resolve against the WorkflowTemplates of the same input.
// Other kinds are listed and skipped. Exit 0 when every object passes, 1
// otherwise, 2 on unreadable input.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/workflow/templateresolution"
	"github.com/argoproj/argo-workflows/v3/workflow/validate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// argoVersion is the Argo Workflows release the module pins (go.mod).
const argoVersion = "argo-workflows v3.7.15"

type templates map[string]*wfv1.WorkflowTemplate

func (t templates) Get(name string) (*wfv1.WorkflowTemplate, error) {
	if wt, ok := t[name]; ok {
		return wt, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "argoproj.io", Resource: "workflowtemplates"}, name)
}

type doc struct {
	kind, name string
	raw        []byte
}

func read(name string) ([]doc, error) {
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	var out []doc
	dr := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for {
		b, err := dr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(b, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if meta.Kind == "" {
			continue
		}
		out = append(out, doc{kind: meta.Kind, name: meta.Metadata.Name, raw: b})
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: validate FILE... (- for stdin)")
		os.Exit(2)
	}
	var docs []doc
	for _, a := range os.Args[1:] {
		d, err := read(a)
		if err != nil {
			fmt.Fprintf(os.Stderr, "validate: %v\n", err)
			os.Exit(2)
		}
		docs = append(docs, d...)
	}
	tmpls := templates{}
	failed := 0
	fail := func(d doc, err error) {
		failed++
		fmt.Printf("FAIL %s/%s: %v\n", d.kind, d.name, err)
	}
	for _, d := range docs {
		if d.kind != "WorkflowTemplate" {
			continue
		}
		var wt wfv1.WorkflowTemplate
		if err := yaml.UnmarshalStrict(d.raw, &wt); err != nil {
			fail(d, err)
			continue
		}
		tmpls[wt.Name] = &wt
	}
	null := &templateresolution.NullClusterWorkflowTemplateGetter{}
	for _, d := range docs {
		switch d.kind {
		case "WorkflowTemplate":
			wt, ok := tmpls[d.name]
			if !ok {
				continue
			}
			if err := validate.ValidateWorkflowTemplate(tmpls, null, wt, nil, validate.ValidateOpts{}); err != nil {
				fail(d, err)
				continue
			}
		case "Workflow":
			var wf wfv1.Workflow
			if err := yaml.UnmarshalStrict(d.raw, &wf); err != nil {
				fail(d, err)
				continue
			}
			if err := validate.ValidateWorkflow(tmpls, null, &wf, nil, validate.ValidateOpts{Submit: true}); err != nil {
				fail(d, err)
				continue
			}
		default:
			fmt.Printf("skip %s/%s (not an Argo template)\n", d.kind, d.name)
			continue
		}
		fmt.Printf("ok   %s/%s (%d bytes)\n", d.kind, d.name, len(d.raw))
	}
	if failed > 0 {
		fmt.Printf("%d of %d objects failed Argo's validation\n", failed, len(docs))
		os.Exit(1)
	}
	fmt.Printf("%d objects, every Argo template valid (%s)\n", len(docs), strings.TrimSpace(argoVersion))
}
