//go:build unix

package deprecations

import (
	"io/fs"
	"syscall"
)

// readFile reads a regular file into buf (grown as needed) with plain
// system calls: open, fstat, read, close. os.Open costs a run over
// thousands of small files more than their reading does: it tries to
// register every file with the network poller (fcntl and epoll_ctl, both
// refused for regular files) and sets a finalizer on each. Anything but a
// regular file (a FIFO from process substitution, a device) goes through
// the os package (ok false). The buffer is reused for the next file, so
// nothing may keep a slice of what it returns. size is the file's size;
// a file over limit is not read (data nil, size > limit). A file is read
// as long as fstat said it was: one that grows meanwhile is read as it
// was then.
func readFile(path string, buf []byte, limit int64) (data []byte, size int64, ok bool, err error) {
	return readOpen(func() (int, error) {
		return syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	}, path, buf, limit)
}

// readOpen is readFile with the file opened by open (retried on EINTR);
// path names it in errors.
func readOpen(open func() (int, error), path string, buf []byte, limit int64) (data []byte, size int64, ok bool, err error) {
	var fd int
	for {
		fd, err = open()
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, 0, true, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, 0, true, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, 0, false, nil
	}
	size = st.Size
	if size > limit {
		return nil, size, true, nil
	}
	// Room for the size and more: a file of size 0 (as in /proc) is read
	// to its end.
	if int64(cap(buf)) < size+1 {
		buf = make([]byte, 0, size+512)
	}
	buf = buf[:0]
	for int64(len(buf)) <= limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		end := cap(buf)
		if int64(end) > limit+1 {
			end = int(limit + 1)
		}
		n, err := syscall.Read(fd, buf[len(buf):end])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return buf, int64(len(buf)), true, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
		if size > 0 && int64(len(buf)) == size {
			// All that fstat counted: the read that would see the end
			// is one system call more per file (a sixth of them) for
			// nothing. A file of size 0 (as in /proc) is read to its end.
			break
		}
	}
	return buf, int64(len(buf)), true, nil
}
