// Package deprecations implements `kubectl deprecations`: find who still uses deprecated or removed Kubernetes APIs.
package deprecations
