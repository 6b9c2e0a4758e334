package fleetrun

import (
	"os"
	"sort"
	"strings"
	"sync"
)

// StoreEnvPrefix is put before every key of spec.engine.argo.storeSecret
// in a step pod's environment: the render's envFrom sets it as the
// prefix ("An optional identifier to prepend to each key in the
// ConfigMap/Secret", EnvFromSource.Prefix in k8s.io/api v0.37.2
// core/v1/types.go, the type Argo Workflows v3.7.15 takes for a
// template's container), so the store's credentials arrive under names no
// other program reads. The step process lifts them to their own names
// (AWS_ACCESS_KEY_ID, ...) for its own store client only (LiftStoreEnv),
// and every command it starts gets an environment without them
// (CommandEnv): an action's command (a cloud CLI upgrading a node pool)
// runs with the pod's own identity, never with the store's keys.
const StoreEnvPrefix = "GPUFLEET_STORE_"

// storeEnv remembers what LiftStoreEnv set: each lifted name and the value
// it had before (nil when it was unset).
var storeEnv struct {
	sync.Mutex
	lifted map[string]*string
}

// LiftStoreEnv sets, in this process, each StoreEnvPrefix+NAME variable's
// value as NAME, where the store's client (gocloud.dev/blob's openers and
// the cloud SDKs under them) reads it. It is idempotent.
func LiftStoreEnv() {
	storeEnv.Lock()
	defer storeEnv.Unlock()
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		name, ok := strings.CutPrefix(k, StoreEnvPrefix)
		if !ok || name == "" {
			continue
		}
		if storeEnv.lifted == nil {
			storeEnv.lifted = map[string]*string{}
		}
		if _, done := storeEnv.lifted[name]; !done {
			var before *string
			if old, had := os.LookupEnv(name); had {
				before = &old
			}
			storeEnv.lifted[name] = before
		}
		_ = os.Setenv(name, v)
	}
}

// CommandEnv is the environment of a command a step starts: this
// process's, without the store's credentials (no StoreEnvPrefix variable,
// and each name LiftStoreEnv set back to what it was before, or unset),
// then extra.
func CommandEnv(extra ...string) []string {
	storeEnv.Lock()
	defer storeEnv.Unlock()
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, lifted := storeEnv.lifted[k]; lifted || strings.HasPrefix(k, StoreEnvPrefix) {
			continue
		}
		out = append(out, kv)
	}
	var names []string
	for k := range storeEnv.lifted {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if before := storeEnv.lifted[k]; before != nil {
			out = append(out, k+"="+*before)
		}
	}
	return append(out, extra...)
}
