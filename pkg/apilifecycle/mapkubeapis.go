package apilifecycle

// The map file of helm-mapkubeapis, the Helm plugin that rewrites the
// apiVersion of objects in Helm release records. Its format, as its own
// config/Map.yaml and pkg/mapping/mapping.go have it (github.com/helm/
// helm-mapkubeapis): a top-level "mappings" list whose items hold
// deprecatedAPI and newAPI, each the literal text "apiVersion: X\nkind: K\n"
// that the plugin replaces in the stored manifest, and deprecatedInVersion
// and removedInVersion as "v1.N". The plugin applies a mapping once the
// server reaches deprecatedInVersion (removedInVersion when that is
// empty). Its own file lists an API without a replacement
// (policy/v1beta1 PodSecurityPolicy) with deprecatedAPI and
// removedInVersion alone; so does this one.

// MapKubeAPIsMapping is one item of a helm-mapkubeapis map file.
type MapKubeAPIsMapping struct {
	DeprecatedAPI       string `json:"deprecatedAPI"`
	NewAPI              string `json:"newAPI,omitempty"`
	DeprecatedInVersion string `json:"deprecatedInVersion,omitempty"`
	RemovedInVersion    string `json:"removedInVersion,omitempty"`
}

// MapKubeAPIsFile is a helm-mapkubeapis map file.
type MapKubeAPIsFile struct {
	Mappings []MapKubeAPIsMapping `json:"mappings"`
}

// MapKubeAPIs returns the table's Kubernetes entries that are deprecated
// or removed, as helm-mapkubeapis mappings: a replacement of the same kind
// as newAPI, and a removed API without one (the plugin drops such an
// object from the record) alone. Left out: entries for every kind of a
// group version (no kind) and third-party components, as the plugin
// matches one apiVersion and kind against the Kubernetes release; an API
// whose replacement is another kind (v1 Endpoints to EndpointSlice), which
// no rewrite of the apiVersion turns into; and one deprecated with neither
// a replacement nor a removal.
func (t *Table) MapKubeAPIs() MapKubeAPIsFile {
	f := MapKubeAPIsFile{Mappings: []MapKubeAPIsMapping{}}
	for _, e := range t.Entries() {
		if e.Kind == "" || e.Component != "" || (e.Deprecated.IsZero() && e.Removed.IsZero()) {
			continue
		}
		m := MapKubeAPIsMapping{DeprecatedAPI: mapAPI(e.APIVersion(), e.Kind)}
		switch {
		case !e.Replacement.IsZero() && (e.Replacement.Kind == "" || e.Replacement.Kind == e.Kind):
			m.NewAPI = mapAPI(e.Replacement.APIVersion(), e.Kind)
		case !e.Replacement.IsZero(), e.Removed.IsZero():
			continue
		}
		if !e.Deprecated.IsZero() {
			m.DeprecatedInVersion = "v" + e.Deprecated.String()
		}
		if !e.Removed.IsZero() {
			m.RemovedInVersion = "v" + e.Removed.String()
		}
		f.Mappings = append(f.Mappings, m)
	}
	return f
}

func mapAPI(apiVersion, kind string) string {
	return "apiVersion: " + apiVersion + "\nkind: " + kind + "\n"
}
