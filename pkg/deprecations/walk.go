package deprecations

import (
	"os"
	"sync/atomic"
)

// walkEntry is one file a walk found: its path and, where the walk holds
// its directory open (Linux), that directory and the file's name in it,
// so that the file is opened relative to the directory instead of by a
// path the kernel resolves again, component by component, for every file.
type walkEntry struct {
	path string
	dir  *openDir // nil: opened by path
	name string
	// arg is the index of the path argument the file was found under.
	arg int
}

// done releases the entry's hold on its directory.
func (e walkEntry) done() { e.dir.release() }

// openDir is a directory a walk holds open while files in it wait to be
// read: the walk holds one reference while it lists the directory, and
// each entry it hands out one more; the last release closes it.
type openDir struct {
	f    *os.File
	fd   int
	refs atomic.Int32
}

func (d *openDir) release() {
	if d != nil && d.refs.Add(-1) == 0 {
		d.f.Close()
	}
}
