//go:build !unix && !windows

package fleetrun

import (
	"os"
	"sync"
)

// On a system with neither flock nor LockFileEx the lock holds within
// this process only.
var dirLockMu sync.Mutex

func lockFile(*os.File) error   { dirLockMu.Lock(); return nil }
func unlockFile(*os.File) error { dirLockMu.Unlock(); return nil }
