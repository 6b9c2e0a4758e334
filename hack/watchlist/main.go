// Command watchlist is the floor the scale benchmarks measure a plugin
// against: a bare client that reads whole resources the way the plugins
// do (one watch-list stream each, in protobuf, all at once, through
// client-go's own decoders) and does nothing with the objects but count
// them. It prints one line per resource, "RESOURCE N".
//
//	watchlist --kubeconfig FILE nodes pods poddisruptionbudgets
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	timeout := flag.Duration("timeout", 2*time.Minute, "limit for each stream")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err)
	}
	cfg.QPS, cfg.Burst = -1, -1
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = "watchlist-floor"
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail(err)
	}
	watchers := map[string]func(context.Context, metav1.ListOptions) (watch.Interface, error){
		"nodes": func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return kc.CoreV1().Nodes().Watch(ctx, o)
		},
		"pods": func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return kc.CoreV1().Pods("").Watch(ctx, o)
		},
		"poddisruptionbudgets": func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return kc.PolicyV1().PodDisruptionBudgets("").Watch(ctx, o)
		},
	}
	counts := make([]int, flag.NArg())
	errs := make([]error, flag.NArg())
	var wg sync.WaitGroup
	for i, res := range flag.Args() {
		open, ok := watchers[res]
		if !ok {
			fail(fmt.Errorf("unknown resource %q (nodes, pods, poddisruptionbudgets)", res))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), *timeout)
			defer cancel()
			counts[i], errs[i] = read(ctx, open)
		}()
	}
	wg.Wait()
	for i, res := range flag.Args() {
		if errs[i] != nil {
			fail(fmt.Errorf("%s: %w", res, errs[i]))
		}
		fmt.Printf("%s %d\n", res, counts[i])
	}
}

// read reads one watch-list stream to its initial-events-end bookmark.
func read(ctx context.Context, open func(context.Context, metav1.ListOptions) (watch.Interface, error)) (int, error) {
	w, err := open(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case ev, open := <-w.ResultChan():
			if !open {
				return n, fmt.Errorf("stream ended after %d objects, before the bookmark", n)
			}
			switch ev.Type {
			case watch.Added:
				n++
			case watch.Bookmark:
				if m, err := meta.Accessor(ev.Object); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
					return n, nil
				}
			case watch.Error:
				return n, fmt.Errorf("watch error: %v", ev.Object)
			}
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "watchlist:", err)
	os.Exit(1)
}
