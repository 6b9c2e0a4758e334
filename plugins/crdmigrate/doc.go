// Package crdmigrate implements `kubectl crd-migrate`: rewrite stored custom resources to the storage version and trim storedVersions.
package crdmigrate
