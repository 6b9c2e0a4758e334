//go:build deps

// Package deps pins, for `go mod tidy`, the libraries the plugins build on
// before every one of them is imported by plugin code, so parallel work on
// different plugins does not keep rewriting go.mod.
package deps

import (
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/google/go-containerregistry/pkg/name"
	_ "github.com/google/go-containerregistry/pkg/registry"
	_ "github.com/google/go-containerregistry/pkg/v1/remote"
	_ "github.com/prometheus/common/expfmt"
	_ "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	_ "k8s.io/client-go/dynamic/fake"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "k8s.io/client-go/tools/pager"
	_ "k8s.io/client-go/util/retry"
	_ "k8s.io/kubectl/pkg/drain"
	_ "k8s.io/utils/clock/testing"
	_ "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	_ "sigs.k8s.io/jobset/client-go/clientset/versioned/fake"
	_ "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	_ "sigs.k8s.io/kueue/client-go/clientset/versioned/fake"
	_ "sigs.k8s.io/kustomize/api/krusty"
)
