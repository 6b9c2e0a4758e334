// Package crdmigrate implements `kubectl crd-migrate`: it reports the
// storage state of CustomResourceDefinitions (status, the default) and
// rewrites stored custom resources to the storage version, then trims
// status.storedVersions (run).
//
// It owns flags, output and exit codes only; the inspection and the
// migration live in pkg/crdmigrate. It never writes to stdout anything but
// the report, and progress goes to stderr.
package crdmigrate
