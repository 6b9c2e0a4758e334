package fleetrun

import (
	"os"
	"path/filepath"
)

// lockKeyFile holds the lock of a directory store's key at p until the
// returned func is called: an exclusive advisory lock on a hidden file
// beside the key (".<name>.lock", which List leaves out), kept in place
// so that two processes always lock the same file.
func lockKeyFile(p string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = unlockFile(f); f.Close() }, nil
}
