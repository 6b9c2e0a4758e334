package fleetrun

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"errors"
	"fmt"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

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
// does not exist yet, which is how evidence is never overwritten; Update
// replaces a key only while it holds the version its writer read, which is
// how a cluster's state and the run's lock change hands: of two writers
// that read one version, one wins and the other gets ErrConflict.
type Store interface {
	// Read returns a key's bytes, or an error wrapping ErrNotFound.
	Read(ctx context.Context, key string) ([]byte, error)
	// ReadVersion returns a key's bytes and their version, an opaque
	// token that changes with every write of the key, or an error
	// wrapping ErrNotFound.
	ReadVersion(ctx context.Context, key string) (data []byte, version string, err error)
	// Write replaces a key atomically.
	Write(ctx context.Context, key string, data []byte) error
	// Create writes a key atomically when it does not exist, else
	// returns an error wrapping ErrExists and changes nothing.
	Create(ctx context.Context, key string, data []byte) error
	// Update replaces a key atomically when it still holds version (as
	// ReadVersion or an earlier Update returned it; "" for a key that
	// must not exist yet) and returns the new version; else it returns
	// an error wrapping ErrConflict and changes nothing.
	Update(ctx context.Context, key string, data []byte, version string) (string, error)
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
	// ErrConflict is an Update whose key changed since its version was
	// read: someone else wrote it first.
	ErrConflict = errors.New("changed in the store since it was read")
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
		// A step pod's store credentials arrive prefixed (render's
		// envFrom): lifted here, for this process's client alone.
		LiftStoreEnv()
		if u.Scheme == "s3" && u.Query().Get("region") == "" {
			// Found as s3blob finds it (the SDK's default chain: AWS_REGION,
			// the profile's config file); without one the first read
			// fails with the SDK's "Invalid region: region was not a
			// valid DNS name".
			if cfg, err := awsconfig.LoadDefaultConfig(ctx); err == nil && cfg.Region == "" {
				return nil, fmt.Errorf("store %s: no AWS region: add ?region=REGION to the URL or set AWS_REGION", raw)
			}
		}
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
// Azure block list), so a half-written state file cannot be read. GCS and
// Azure check the MD5 the upload carries; S3 does not (gocloud.dev v0.49.0
// blob/s3blob: "S3 doesn't support ContentMD5 validation anymore", and the
// option is dropped), so there the SDK's own request checksums are the
// check. Transient failures (a 5xx, a timeout, S3's 409
// ConditionalRequestConflict) are retried with backoff (store_cas.go).
type blobStore struct {
	b   *blob.Bucket
	url string
	// mu serializes Update on a bucket with no conditional writes of
	// its own (memblob in tests): there versions are MD5s, compared and
	// written under it, which holds within this process only.
	mu sync.Mutex
}

func (s *blobStore) URL() string  { return s.url }
func (s *blobStore) Close() error { return s.b.Close() }

func (s *blobStore) Read(ctx context.Context, key string) ([]byte, error) {
	data, _, err := s.ReadVersion(ctx, key)
	return data, err
}

func (s *blobStore) put(ctx context.Context, key string, data []byte, opts *blob.WriterOptions) error {
	if err := checkKey(key); err != nil {
		return err
	}
	sum := md5.Sum(data)
	opts.ContentType, opts.ContentMD5 = contentType(key), sum[:]
	// Closing a writer commits what was written, so a failed write
	// cancels its context first: the upload is then abandoned.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.b.NewWriter(wctx, key, opts)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		cancel()
		_ = w.Close()
		return err
	}
	return w.Close()
}

func (s *blobStore) Write(ctx context.Context, key string, data []byte) error {
	return retryTransient(ctx, func() error { return s.put(ctx, key, data, &blob.WriterOptions{}) })
}

func (s *blobStore) Create(ctx context.Context, key string, data []byte) error {
	retried := false
	err := retryTransient(ctx, func() error {
		err := s.put(ctx, key, data, &blob.WriterOptions{IfNotExist: true})
		if gcerrors.Code(err) == gcerrors.FailedPrecondition {
			if retried {
				// An earlier try may have landed before its
				// answer was lost: the key holding these very
				// bytes is this create's own.
				if cur, rerr := s.Read(ctx, key); rerr == nil && bytes.Equal(cur, data) {
					return nil
				}
			}
			return fmt.Errorf("%s: %w", key, ErrExists)
		}
		if err != nil {
			retried = true
		}
		return err
	})
	return err
}

func (s *blobStore) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	return retryTransient(ctx, func() error {
		err := s.b.Delete(ctx, key)
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil
		}
		return err
	})
}

func (s *blobStore) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	err := retryTransient(ctx, func() error {
		keys = keys[:0]
		it := s.b.List(&blob.ListOptions{Prefix: prefix})
		for {
			o, err := it.Next(ctx)
			if err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			if !o.IsDir {
				keys = append(keys, o.Key)
			}
		}
	})
	sort.Strings(keys)
	return keys, err
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
// processes can never both create one. Update compares and renames holding
// an advisory lock on the key (flock, LockFileEx: dirlock_*.go) that Write
// and Delete take too; a version is the SHA-256 of the bytes and the
// modification time the temporary file got, so a key rewritten with the
// same bytes has a new one.
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

func (s *DirStore) Read(ctx context.Context, key string) ([]byte, error) {
	data, _, err := s.ReadVersion(ctx, key)
	return data, err
}

func (s *DirStore) ReadVersion(_ context.Context, key string) ([]byte, string, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, "", err
	}
	data, v, err := readVersion(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	return data, v, err
}

// readVersion reads a file and its version from one open file: a rename
// over the path does not change what an open file reads.
func readVersion(p string) ([]byte, string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, "", err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, "", err
	}
	return data, fileVersion(data, fi.ModTime()), nil
}

func fileVersion(data []byte, mod time.Time) string {
	sum := sha256.Sum256(data)
	return fmt.Sprintf("%x-%d", sum[:16], mod.UnixNano())
}

// Update replaces key when it holds version, comparing and renaming under
// the key's lock.
func (s *DirStore) Update(_ context.Context, key string, data []byte, version string) (string, error) {
	p, err := s.path(key)
	if err != nil {
		return "", err
	}
	unlock, err := lockKeyFile(p)
	if err != nil {
		return "", err
	}
	defer unlock()
	_, cur, err := readVersion(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if version != "" {
			return "", fmt.Errorf("%s: %w", key, ErrConflict)
		}
	case err != nil:
		return "", err
	case cur != version:
		return "", fmt.Errorf("%s: %w", key, ErrConflict)
	}
	t, err := temp(p, data)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(t)
	if err == nil {
		err = os.Rename(t, p)
	}
	if err != nil {
		_ = os.Remove(t)
		return "", err
	}
	return fileVersion(data, fi.ModTime()), nil
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
	unlock, err := lockKeyFile(p)
	if err != nil {
		return err
	}
	defer unlock()
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
	unlock, err := lockKeyFile(p)
	if err != nil {
		return err
	}
	defer unlock()
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
