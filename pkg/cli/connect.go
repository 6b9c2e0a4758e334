package cli

import (
	"context"
	"fmt"
)

// Connect checks that the cluster answers, and returns the report metadata
// with the server version filled in. A local configuration problem is a
// usage error (exit 2); an unreachable or refusing server is exit 3, with a
// hint naming the context.
func Connect(ctx context.Context, cg ClientGetter) (Metadata, error) {
	md := cg.Metadata()
	if _, err := cg.ToRESTConfig(); err != nil {
		return md, KubeconfigErr(err)
	}
	dc, err := cg.Discovery()
	if err != nil {
		return md, ClassifyClusterErr(err, md, "connecting to the cluster")
	}
	type result struct {
		v   string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		info, err := dc.ServerVersion()
		if err != nil {
			ch <- result{err: err}
			return
		}
		ch <- result{v: info.GitVersion}
	}()
	select {
	case <-ctx.Done():
		return md, ctx.Err()
	case r := <-ch:
		if r.err != nil {
			return md, ClassifyClusterErr(r.err, md, "cannot reach the cluster")
		}
		md.ServerVersion = r.v
		return md, nil
	}
}

// ClassifyClusterErr wraps an error from the cluster with what was being
// done and where, and the exit code it maps to: configuration errors are
// exit 2, everything else exit 3 with a hint.
func ClassifyClusterErr(err error, md Metadata, what string) error {
	if err == nil {
		return nil
	}
	where := ""
	if md.Context != "" {
		where = fmt.Sprintf(" (context %s)", md.Context)
	}
	if IsConfigError(err) {
		return KubeconfigErr(err)
	}
	wrapped := fmt.Errorf("%s%s: %w", what, where, err)
	hint := "kubectl cluster-info"
	if md.Context != "" {
		hint += " --context " + md.Context
	}
	return &ExitError{Code: ExitUnavailable, Err: wrapped, Hint: hint}
}
