package fleetrun

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob://
	_ "gocloud.dev/blob/gcsblob"   // gs://
	_ "gocloud.dev/blob/s3blob"    // s3://
	"gocloud.dev/gcerrors"
)

// Store is where the programme keeps its state and evidence: the frozen
// plan, one state file per cluster, each step's evidence and the decisions
// of people. Keys are slash-separated paths (runs/<run>/state/<cluster>.json,
// latest/<cluster>/preflight.json).
//
// Every write is whole or absent: a reader never sees half a file, whatever
// kills the writer. Write replaces a key; Create writes one only when it
// does not exist yet, which is how evidence is never overwritten and how
// the run's lock is taken.
type Store interface {
	// Read returns a key's bytes, or an error wrapping ErrNotFound.
	Read(ctx context.Context, key string) ([]byte, error)
	// Write replaces a key atomically.
	Write(ctx context.Context, key string, data []byte) error
	// Create writes a key atomically when it does not exist, else
	// returns an error wrapping ErrExists and changes nothing.
	Create(ctx context.Context, key string, data []byte) error
	// Delete removes a key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List returns the keys under prefix, sorted.
	List(ctx context.Context, prefix string) ([]string, error)
	// URL is where the store is, for messages.
	URL() string
	// Close releases the store's connections.
	Close() error
}

// Errors of a Store. ErrNotFound is also fs.ErrNotExist, so a reader that
// knows only io/fs (the fleet report's) tells a missing key from a failure.
var (
	ErrNotFound error = notFound{}
	ErrExists         = errors.New("already in the store")
)

type notFound struct{}

func (notFound) Error() string        { return "not found in the store" }
func (notFound) Is(target error) bool { return target == fs.ErrNotExist }

// OpenStore opens the store at a URL: file:///path or a plain path (a
// directory on this machine), s3://bucket/prefix, gs://bucket/prefix or
// azblob://container/prefix, with the query parameters of gocloud.dev/blob
// (s3: region, endpoint, use_path_style, disable_https). Credentials come
// from the usual places of each cloud (AWS_* variables and files,
// GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_*).
func OpenStore(ctx context.Context, raw string) (Store, error) {
	if raw != "" && !strings.Contains(raw, "://") {
		// A plain directory, as a person running the steps by hand
		// gives it: the same store as file://<its absolute path>.
		return OpenDirStore(raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("store URL %q: %w", raw, err)
	}
	switch u.Scheme {
	case "file":
		dir := u.Path
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("store URL %q: a file URL names a local path: file:///path", raw)
		}
		if dir == "" {
			return nil, fmt.Errorf("store URL %q: no path", raw)
		}
		return OpenDirStore(dir)
	case "s3", "gs", "azblob":
		prefix := strings.Trim(u.Path, "/")
		bu := *u
		bu.Path = ""
		b, err := blob.OpenBucket(ctx, bu.String())
		if err != nil {
			return nil, fmt.Errorf("opening the store %s: %w", raw, err)
		}
		if prefix != "" {
			b = blob.PrefixedBucket(b, prefix+"/")
		}
		return &blobStore{b: b, url: raw}, nil
	}
	return nil, fmt.Errorf("store URL %q: want file:///path, s3://bucket/prefix, gs://bucket/prefix or azblob://container/prefix", raw)
}

func checkKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "\\") || path.Clean(key) != key || strings.HasPrefix(key, "..") {
		return fmt.Errorf("bad store key %q", key)
	}
	return nil
}

// blobStore is a bucket of gocloud.dev/blob. An object appears only when
// its upload completes (S3 PutObject, a finalized GCS upload, a committed
// Azure block list), so a half-written state file cannot be read; the
// upload carries its MD5, which the services check.
type blobStore struct {
	b   *blob.Bucket
	url string
}

func (s *blobStore) URL() string  { return s.url }
func (s *blobStore) Close() error { return s.b.Close() }

func (s *blobStore) Read(ctx context.Context, key string) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	data, err := s.b.ReadAll(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	return data, err
}

func (s *blobStore) put(ctx context.Context, key string, data []byte, ifNotExist bool) error {
	if err := checkKey(key); err != nil {
		return err
	}
	sum := md5.Sum(data)
	// Closing a writer commits what was written, so a failed write
	// cancels its context first: the upload is then abandoned.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.b.NewWriter(wctx, key, &blob.WriterOptions{ContentType: contentType(key), ContentMD5: sum[:], IfNotExist: ifNotExist})
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		cancel()
		_ = w.Close()
		return err
	}
	err = w.Close()
	if ifNotExist && gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return fmt.Errorf("%s: %w", key, ErrExists)
	}
	return err
}

func (s *blobStore) Write(ctx context.Context, key string, data []byte) error {
	return s.put(ctx, key, data, false)
}

func (s *blobStore) Create(ctx context.Context, key string, data []byte) error {
	return s.put(ctx, key, data, true)
}

func (s *blobStore) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	err := s.b.Delete(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil
	}
	return err
}

func (s *blobStore) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	it := s.b.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		if !o.IsDir {
			keys = append(keys, o.Key)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

func contentType(key string) string {
	switch path.Ext(key) {
	case ".json":
		return "application/json"
	case ".yaml":
		return "application/yaml"
	case ".html":
		return "text/html; charset=utf-8"
	}
	return "text/plain; charset=utf-8"
}

// DirStore is a store in a directory of this machine. Write goes to a
// temporary file that is synced and renamed over the key; Create links the
// temporary file to the key, which fails when the key exists, so two
// processes can never both create one.
type DirStore struct {
	dir string
}

// OpenDirStore opens (and creates) a directory store.
func OpenDirStore(dir string) (*DirStore, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("store directory %s: %w", abs, err)
	}
	return &DirStore{dir: abs}, nil
}

func (s *DirStore) URL() string  { return "file://" + filepath.ToSlash(s.dir) }
func (s *DirStore) Close() error { return nil }

func (s *DirStore) path(key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, filepath.FromSlash(key)), nil
}

func (s *DirStore) Read(_ context.Context, key string) ([]byte, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	return data, err
}

// temp writes data to a synced temporary file next to p.
func temp(p string, data []byte) (string, error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".tmp-*")
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

func (s *DirStore) Write(_ context.Context, key string, data []byte) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	t, err := temp(p, data)
	if err != nil {
		return err
	}
	if err := os.Rename(t, p); err != nil {
		_ = os.Remove(t)
		return err
	}
	return nil
}

func (s *DirStore) Create(_ context.Context, key string, data []byte) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	t, err := temp(p, data)
	if err != nil {
		return err
	}
	defer os.Remove(t)
	if err := os.Link(t, p); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w", key, ErrExists)
		}
		return err
	}
	return nil
}

func (s *DirStore) Delete(_ context.Context, key string) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (s *DirStore) List(_ context.Context, prefix string) ([]string, error) {
	var keys []string
	err := filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		rel, err := filepath.Rel(s.dir, p)
		if err != nil {
			return err
		}
		k := filepath.ToSlash(rel)
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
		return nil
	})
	sort.Strings(keys)
	return keys, err
}
