package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/spf13/cobra"
)

// ContextFlags are the multi-context flags of the read-only plugins.
type ContextFlags struct {
	Contexts    []string
	AllContexts bool
	Parallel    int
}

// NewContextFlags returns the flags with their defaults.
func NewContextFlags() *ContextFlags { return &ContextFlags{Parallel: 8} }

// AddFlags registers --contexts, --all-contexts and --parallel.
func (f *ContextFlags) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&f.Contexts, "contexts", f.Contexts, "Check these kubeconfig contexts (comma-separated) and report them together.")
	cmd.Flags().BoolVar(&f.AllContexts, "all-contexts", f.AllContexts, "Check every context of the kubeconfig and report them together.")
	cmd.Flags().IntVar(&f.Parallel, "parallel", f.Parallel, "How many contexts to check at once with --contexts or --all-contexts; a context that does not answer is found without holding one of these.")
}

// Validate checks the flags without touching the network. contextFlagSet
// says whether --context was given too.
func (f *ContextFlags) Validate(contextFlagSet bool) error {
	if f.AllContexts && len(f.Contexts) > 0 {
		return fmt.Errorf("--all-contexts and --contexts cannot be combined")
	}
	if contextFlagSet && f.Multi() {
		return fmt.Errorf("--context cannot be combined with --contexts or --all-contexts")
	}
	if f.Parallel < 1 {
		return fmt.Errorf("--parallel must be at least 1, got %d", f.Parallel)
	}
	for _, c := range f.Contexts {
		if strings.TrimSpace(c) == "" {
			return fmt.Errorf("--contexts has an empty name")
		}
	}
	return nil
}

// Multi reports whether several contexts were asked for.
func (f *ContextFlags) Multi() bool { return f.AllContexts || len(f.Contexts) > 0 }

// Resolve returns the contexts to check; it fails with a usage error on a
// context the kubeconfig does not have.
func (f *ContextFlags) Resolve(cg ClientGetter) ([]string, error) {
	all, err := cg.Contexts()
	if err != nil {
		return nil, KubeconfigErr(err)
	}
	if f.AllContexts {
		if len(all) == 0 {
			return nil, Usagef("the kubeconfig has no contexts")
		}
		return all, nil
	}
	known := map[string]bool{}
	for _, c := range all {
		known[c] = true
	}
	for _, c := range f.Contexts {
		if !known[c] {
			return nil, UnknownContextErr(c)
		}
	}
	return f.Contexts, nil
}

// ContextResult is the outcome of one context in a fan-out.
type ContextResult[T any] struct {
	Context string
	Value   T
	Err     error
}

// FanOut runs fn for every context with at most parallel at once and
// returns the results in the order of contexts. One failing context does not
// stop the others.
func FanOut[T any](ctx context.Context, contexts []string, parallel int, fn func(ctx context.Context, name string) (T, error)) []ContextResult[T] {
	return FanOutProbed(ctx, contexts, parallel, nil, fn)
}

// ProbeParallel is how many reachability probes FanOutReachable runs at
// once when --parallel is lower. A probe is one GET /version: a goroutine
// and a connection waiting, so many can wait together, while the bound
// keeps the open connections of a kubeconfig with thousands of contexts
// within a process's file limit.
const ProbeParallel = 128

// FanOutReachable is FanOut for contexts of cg's kubeconfig: each context
// must first answer Connect (GET /version, bounded by --request-timeout)
// before it takes one of the parallel slots. A context that does not
// answer fails with Connect's error (exit 3) without having held a slot,
// so a sweep in which more contexts hang than --parallel allows still
// takes about one --request-timeout, not one for every parallel of them.
func FanOutReachable[T any](ctx context.Context, cg ClientGetter, contexts []string, parallel int, fn func(ctx context.Context, name string) (T, error)) []ContextResult[T] {
	probe := func(ctx context.Context, name string) error {
		_, err := Connect(ctx, cg.ForContext(name))
		return err
	}
	return FanOutProbed(ctx, contexts, parallel, probe, fn)
}

// FanOutProbed is FanOut with a probe run first for every context, up to
// max(parallel, ProbeParallel) probes at once and outside the parallel
// slots: fn runs only for contexts whose probe passed, and the probe's
// error is the result of the others. A nil probe is FanOut.
func FanOutProbed[T any](ctx context.Context, contexts []string, parallel int, probe func(ctx context.Context, name string) error, fn func(ctx context.Context, name string) (T, error)) []ContextResult[T] {
	if parallel < 1 {
		parallel = 1
	}
	results := make([]ContextResult[T], len(contexts))
	sem := make(chan struct{}, parallel)
	probes := make(chan struct{}, max(parallel, ProbeParallel))
	acquire := func(slots chan struct{}) error {
		select {
		case slots <- struct{}{}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var wg sync.WaitGroup
	for i, name := range contexts {
		results[i].Context = name
		wg.Add(1)
		go func() {
			defer wg.Done()
			if probe != nil {
				if err := acquire(probes); err != nil {
					results[i].Err = err
					return
				}
				err := probe(ctx, name)
				<-probes
				if err != nil {
					results[i].Err = err
					return
				}
			}
			if err := acquire(sem); err != nil {
				results[i].Err = err
				return
			}
			defer func() { <-sem }()
			v, err := fn(ctx, name)
			results[i].Value, results[i].Err = v, err
		}()
	}
	wg.Wait()
	return results
}

// ContextEntry starts the list entry of one context of a fan-out. For a
// context that could not be checked it records the error and its exit
// code, says so on errOut unless quiet, and returns false; the caller
// fills in the report of a context that was checked.
func ContextEntry[T any](r ContextResult[T], errOut io.Writer, quiet bool) (ContextReport, bool) {
	cr := ContextReport{Context: r.Context}
	if r.Err == nil {
		return cr, true
	}
	cr.Error, cr.ExitCode = r.Err.Error(), ExitCode(r.Err)
	if !quiet {
		fmt.Fprintf(errOut, "error: context %s: %v\n", r.Context, r.Err)
	}
	return cr, false
}

// ContextsOutcome is the error a multi-context run returns, given each
// context's exit code: nil when all passed, findings when the worst is a
// finding, otherwise the worst code with the count of contexts that could
// not be fully checked (their errors are already on stderr).
func ContextsOutcome(codes []int) error {
	switch worst := Worst(codes...); worst {
	case ExitOK:
		return nil
	case ExitFindings:
		return Findings(1)
	default:
		failed := 0
		for _, c := range codes {
			if c != ExitOK && c != ExitFindings {
				failed++
			}
		}
		return &ExitError{Code: worst, Err: fmt.Errorf("%d of %d contexts could not be checked", failed, len(codes))}
	}
}

// PrintContexts writes a multi-context run: nothing with -q, the list with
// -o json|yaml, otherwise the table when it has rows.
func (f *PrintFlags) PrintContexts(w io.Writer, list ReportList, t Table) error {
	switch {
	case f.Quiet:
		return nil
	case f.Structured():
		return PrintStructured(w, f.Output, list)
	case len(t.Rows) > 0:
		return t.Print(w, f.TableOptions())
	}
	return nil
}
