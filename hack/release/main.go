// Command release packages the plugins for distribution and renders their
// krew manifests:
//
//	go run ./hack/release dist -version v0.1.0 -build dist/build -out dist
//	go run ./hack/release krew -version v0.1.0 -dist dist -out dist/krew -base-uri https://...
//
// dist expects dist/build/<os>_<arch>/<binary>[.exe] (the Makefile
// cross-compiles them) and writes one reproducible archive per plugin and
// platform: tar.gz for linux and darwin, zip for windows, each holding the
// binary, LICENSE and (not on Windows, whose kubectl can neither find nor
// run an sh script) the plugin's kubectl_complete-* script. krew reads the
// archives' sha256 and renders krew-manifests/<name>.yaml with them, and
// the caveats with README's RBAC table.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: release dist|krew|validate [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "dist":
		err = runDist(os.Args[2:])
	case "krew":
		err = runKrew(os.Args[2:])
	case "validate":
		err = runValidate(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want dist, krew or validate", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}
