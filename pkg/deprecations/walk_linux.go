package deprecations

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// atFDCWD is Linux's AT_FDCWD: openat relative to the working directory
// (the syscall package does not export it).
const atFDCWD = -0x64

// walkDir walks the directory root in the order and with the rules of
// filepath.WalkDir (entries in lexical order, symbolic links neither
// followed nor read, hidden directories below root skipped, the first
// error ends the walk with the same message) and calls fn for each regular
// file with a manifest extension. Each directory is opened relative to its
// parent and kept open until the files handed out from it are read, so
// that each file is opened relative to it: on the corpus x10 (8,930 files
// ten levels deep) opening by the whole path was 14% of a scan's CPU.
func walkDir(root string, fn func(walkEntry) error) error {
	fi, err := os.Lstat(root)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		// A symbolic link to a directory: filepath.WalkDir does not follow
		// it, and neither does this walk.
		return nil
	}
	return walkDirAt(atFDCWD, root, root, fn)
}

func walkDirAt(parent int, name, path string, fn func(walkEntry) error) error {
	var (
		fd  int
		err error
	)
	for {
		fd, err = syscall.Openat(parent, name, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	d := &openDir{f: os.NewFile(uintptr(fd), path), fd: fd}
	d.refs.Store(1)
	defer d.release()
	ents, err := d.f.ReadDir(-1)
	if err != nil {
		return err
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range ents {
		n := e.Name()
		switch {
		case e.IsDir():
			if strings.HasPrefix(n, ".") {
				continue
			}
			if err := walkDirAt(fd, n, filepath.Join(path, n), fn); err != nil {
				return err
			}
		case e.Type().IsRegular() && manifestExt(n):
			d.refs.Add(1)
			if err := fn(walkEntry{path: filepath.Join(path, n), dir: d, name: n}); err != nil {
				return err
			}
		}
	}
	return nil
}

// read reads the entry's file (see readFile), relative to its directory
// when the walk holds that open.
func (e walkEntry) read(buf []byte, limit int64) ([]byte, int64, bool, error) {
	if e.dir == nil {
		return readFile(e.path, buf, limit)
	}
	return readOpen(func() (int, error) {
		return syscall.Openat(e.dir.fd, e.name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	}, e.path, buf, limit)
}
