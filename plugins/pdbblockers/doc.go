// Package pdbblockers implements `kubectl pdb-blockers`: show which pods will block a drain, and exactly why.
package pdbblockers
