// Command rewrite is the floor kubectl crd-migrate's scale benchmark
// measures the plugin against: the least work a migration does, reading
// every object of a resource (pages of 500, JSON) and writing each back
// unchanged with an Update (PUT) of the bytes as listed, from W workers,
// every request through client-go's rate limiter at --qps (burst the
// same). No checkpoint, no storedVersions, no retries. It prints
// "rewritten N".
//
//	rewrite --kubeconfig FILE --qps 500 --workers 32 --namespace NS example.com/v2/widgets
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

type object struct {
	path []string
	body []byte
}

// path is the API path of a resource's objects (name "") or of one.
func path(gvr []string, ns, name string) []string {
	p := []string{"apis", gvr[0], gvr[1]}
	if ns != "" {
		p = append(p, "namespaces", ns)
	}
	p = append(p, gvr[2])
	if name != "" {
		p = append(p, name)
	}
	return p
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	qps := flag.Float64("qps", 50, "most requests per second")
	workers := flag.Int("workers", 8, "concurrent writes")
	ns := flag.String("namespace", "", "namespace (default all)")
	flag.Parse()
	gvr := strings.Split(flag.Arg(0), "/")
	if flag.NArg() != 1 || len(gvr) != 3 || *workers < 1 {
		fail(fmt.Errorf("want one GROUP/VERSION/RESOURCE and --workers of 1 or more"))
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err)
	}
	cfg.QPS, cfg.Burst = float32(*qps), max(1, int(*qps))
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	cfg.UserAgent = "rewrite-floor"
	rc, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		fail(err)
	}
	g, ctx := errgroup.WithContext(context.Background())
	work := make(chan object)
	var n atomic.Int64
	for range *workers {
		g.Go(func() error {
			for o := range work {
				if err := rc.Put().AbsPath(o.path...).Body(o.body).Do(ctx).Error(); err != nil {
					return fmt.Errorf("%s: %w", strings.Join(o.path, "/"), err)
				}
				n.Add(1)
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(work)
		cont := ""
		for {
			res := rc.Get().AbsPath(path(gvr, *ns, "")...).Param("limit", "500").Param("continue", cont).Do(ctx)
			if err := res.Error(); err != nil {
				return fmt.Errorf("listing: %w", err)
			}
			body, _ := res.Raw()
			var page struct {
				Metadata struct{ Continue string }
				Items    []json.RawMessage
			}
			if err := json.Unmarshal(body, &page); err != nil {
				return err
			}
			for _, it := range page.Items {
				var m struct {
					Metadata struct{ Namespace, Name string }
				}
				if err := json.Unmarshal(it, &m); err != nil {
					return err
				}
				select {
				case work <- object{path(gvr, m.Metadata.Namespace, m.Metadata.Name), it}:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if cont = page.Metadata.Continue; cont == "" {
				return nil
			}
		}
	})
	if err := g.Wait(); err != nil {
		fail(err)
	}
	fmt.Println("rewritten", n.Load())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "rewrite:", err)
	os.Exit(1)
}
