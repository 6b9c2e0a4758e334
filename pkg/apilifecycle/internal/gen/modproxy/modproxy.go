// Package modproxy fetches Go modules for the generators of package
// apilifecycle.
package modproxy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
)

// Download fetches module@version from the module proxy into the module
// cache, outside this module so go.mod and go.sum stay untouched, and
// returns its directory.
func Download(module, version string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GO111MODULE=on", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	var m struct{ Dir, Error string }
	_ = json.Unmarshal(out, &m)
	if err != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %v %s", module, version, err, m.Error)
	}
	return m.Dir, nil
}
