// Package crdmigrate owns the storage-version migration of custom resources:
// it inspects CustomResourceDefinitions (storage, served and deprecated
// versions, status.storedVersions, object counts, conversion strategy and
// the health of the webhooks that reading and writing the objects depend
// on), rewrites every stored object so that the apiserver re-encodes it at
// the storage version (with a client-side loop or the in-tree
// StorageVersionMigration API), keeps a resumable checkpoint in the cluster
// and, only after every object succeeded, trims status.storedVersions.
//
// It never prints, never exits and knows nothing about flags or terminals:
// callers pass clients, a clock and callbacks, and get typed results and
// typed errors back (see ObjectError, PreflightError). Rate limiting is the
// REST client's job (client-go flowcontrol); this package only waits out
// retries.
package crdmigrate
