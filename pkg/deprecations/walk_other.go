//go:build !linux

package deprecations

import (
	"io/fs"
	"path/filepath"
	"strings"
)

// walkDir walks the directory root as filepath.WalkDir does (lexical order,
// symbolic links not followed, hidden directories below root skipped) and
// calls fn for each regular file with a manifest extension.
func walkDir(root string, fn func(walkEntry) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() && manifestExt(d.Name()) {
			return fn(walkEntry{path: path})
		}
		return nil
	})
}

// read reads the entry's file (see readFile).
func (e walkEntry) read(buf []byte, limit int64) ([]byte, int64, bool, error) {
	return readFile(e.path, buf, limit)
}
