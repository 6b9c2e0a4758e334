package fleetrun

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/googleapi"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Compare-and-swap on object stores, through gocloud.dev v0.49.0's As
// hooks (blob/s3blob, blob/gcsblob, blob/azureblob package comments, "As"):
//
//   - S3: the version is the object's ETag, from the reader's
//     s3.GetObjectOutput; Update sets IfMatch (IfNoneMatch "*" for a new
//     key) on the *transfermanager.UploadObjectInput that
//     WriterOptions.BeforeWrite exposes (v0.49.0 exposes that and
//     *transfermanager.Client, not *s3.PutObjectInput), which the transfer
//     manager copies onto PutObject (feature/s3/transfermanager v0.4.16
//     api_op_UploadObject.go). A failed condition is 412
//     PreconditionFailed; 409 ConditionalRequestConflict (a concurrent
//     conditional write in flight) is retried, and the retry meets the
//     winner's write as a 412.
//   - GCS: the version is the object's generation, from the reader's
//     *storage.Reader; Update replaces the **storage.ObjectHandle with one
//     under storage.Conditions{GenerationMatch} (DoesNotExist for a new
//     key).
//   - Azure: the version is the blob's ETag, from the reader's
//     azblobblob.DownloadStreamResponse; Update sets AccessConditions
//     IfMatch on the *azblob.UploadStreamOptions.
//
// gocloud maps each service's failed condition to FailedPrecondition
// (s3blob: "PreconditionFailed"; gcsblob: 412; azureblob: ConditionNotMet),
// which is ErrConflict here.

// superseded is the version Update returns when its write landed but was
// overwritten before it could be read back: any Update from it conflicts,
// so a writer that lost the key cannot write it again.
const superseded = "\x00superseded"

// ReadVersion reads a key and the version of the bytes read, from the one
// response: a version read apart from its bytes could name a later write.
func (s *blobStore) ReadVersion(ctx context.Context, key string) ([]byte, string, error) {
	if err := checkKey(key); err != nil {
		return nil, "", err
	}
	var data []byte
	var version string
	err := retryTransient(ctx, func() error {
		r, err := s.b.NewReader(ctx, key, nil)
		if err != nil {
			return err
		}
		defer r.Close()
		if data, err = io.ReadAll(r); err != nil {
			return err
		}
		version, err = readerVersion(r, data)
		return err
	})
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, "", fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	return data, version, err
}

// readerVersion is the version of what r read: the service's, or the MD5
// of the bytes on a bucket that has none.
func readerVersion(r *blob.Reader, data []byte) (string, error) {
	var s3out s3.GetObjectOutput
	if r.As(&s3out) && s3out.ETag != nil {
		if err := checkS3ETag(&s3out, data); err != nil {
			return "", err
		}
		return "s3:" + *s3out.ETag, nil
	}
	var gr *storage.Reader
	if r.As(&gr) && gr != nil {
		return "gs:" + strconv.FormatInt(gr.Attrs.Generation, 10), nil
	}
	var az azblobblob.DownloadStreamResponse
	if r.As(&az) && az.ETag != nil {
		return "az:" + string(*az.ETag), nil
	}
	sum := md5.Sum(data)
	return "md5:" + hex.EncodeToString(sum[:]), nil
}

// errTornRead is a GetObject whose ETag is not its body's: the server
// read the two apart while a put replaced the object. versitygw v1.8.0's
// posix backend does (an object's ETag is metadata beside its data file);
// the SDK's response checksum, where it is on, catches the same race.
var errTornRead = errors.New("the object's ETag does not match the body read with it (written meanwhile)")

// checkS3ETag holds a GetObject's ETag to its body where the ETag is an
// MD5 of the data: a single-part object, plain or SSE-S3 (AWS S3 API
// Reference, "Object" ETag: not an MD5 for SSE-C, SSE-KMS or multipart
// uploads). An ETag read beside a newer body would let an Update from it
// overwrite a write its caller never saw.
func checkS3ETag(out *s3.GetObjectOutput, data []byte) error {
	etag := strings.Trim(*out.ETag, `"`)
	if len(etag) != 32 || out.SSECustomerAlgorithm != nil || (out.ServerSideEncryption != "" && out.ServerSideEncryption != "AES256") {
		return nil
	}
	if _, err := hex.DecodeString(etag); err != nil {
		return nil
	}
	if sum := md5.Sum(data); hex.EncodeToString(sum[:]) != strings.ToLower(etag) {
		return errTornRead
	}
	return nil
}

// errNoConditions is a bucket whose writer takes none of the conditions
// above.
var errNoConditions = errors.New("this store cannot write conditionally")

// conditions is the BeforeWrite that makes a write conditional on version.
func conditions(version string) func(func(any) bool) error {
	return func(as func(any) bool) error {
		var up *transfermanager.UploadObjectInput
		if as(&up) {
			etag, ok := cutVersion(version, "s3:")
			if !ok {
				return fmt.Errorf("version %q is not an S3 ETag: %w", version, ErrConflict)
			}
			up.IfMatch = aws.String(etag)
			return nil
		}
		var oh **storage.ObjectHandle
		if as(&oh) {
			g, ok := cutVersion(version, "gs:")
			gen, err := strconv.ParseInt(g, 10, 64)
			if !ok || err != nil {
				return fmt.Errorf("version %q is not a GCS generation: %w", version, ErrConflict)
			}
			*oh = (*oh).If(storage.Conditions{GenerationMatch: gen})
			return nil
		}
		var ao *azblob.UploadStreamOptions
		if as(&ao) {
			etag, ok := cutVersion(version, "az:")
			if !ok {
				return fmt.Errorf("version %q is not an Azure ETag: %w", version, ErrConflict)
			}
			e := azcore.ETag(etag)
			ao.AccessConditions = &azblob.AccessConditions{ModifiedAccessConditions: &azblobblob.ModifiedAccessConditions{IfMatch: &e}}
			return nil
		}
		return errNoConditions
	}
}

func cutVersion(version, prefix string) (string, bool) {
	if len(version) <= len(prefix) || version[:len(prefix)] != prefix {
		return "", false
	}
	return version[len(prefix):], true
}

// Update writes key when it still holds version. The new version is read
// back: a writer's Close does not return the service's answer (ETag,
// generation) through gocloud.dev/blob. When the bytes read back are not
// this write's, someone wrote after it, and the version returned is one no
// Update can match.
func (s *blobStore) Update(ctx context.Context, key string, data []byte, version string) (string, error) {
	if version == superseded {
		return "", fmt.Errorf("%s: %w", key, ErrConflict)
	}
	if err := checkKey(key); err != nil {
		return "", err
	}
	opts := func() *blob.WriterOptions {
		if version == "" {
			return &blob.WriterOptions{IfNotExist: true}
		}
		return &blob.WriterOptions{BeforeWrite: conditions(version)}
	}
	retried := false
	err := retryTransient(ctx, func() error {
		err := s.put(ctx, key, data, opts())
		if errors.Is(err, errNoConditions) {
			return s.updateHere(ctx, key, data, version)
		}
		if gcerrors.Code(err) == gcerrors.FailedPrecondition || errors.Is(err, ErrConflict) {
			if retried {
				// A try whose answer was lost may have landed: the
				// key holding these very bytes is this update's.
				if cur, rerr := s.Read(ctx, key); rerr == nil && bytes.Equal(cur, data) {
					return nil
				}
			}
			return fmt.Errorf("%s: %w", key, ErrConflict)
		}
		if err != nil {
			retried = true
		}
		return err
	})
	if err != nil {
		return "", err
	}
	cur, v, err := s.ReadVersion(ctx, key)
	if err != nil || !bytes.Equal(cur, data) {
		return superseded, nil
	}
	return v, nil
}

// updateHere is Update on a bucket with no conditional writes: compared
// and written under s.mu, so it holds within this process (memblob).
func (s *blobStore) updateHere(ctx context.Context, key string, data []byte, version string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, v, err := s.ReadVersion(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		if version != "" {
			return fmt.Errorf("%s: %w", key, ErrConflict)
		}
	case err != nil:
		return err
	case v != version:
		return fmt.Errorf("%s: %w", key, ErrConflict)
	}
	_ = cur
	return s.put(ctx, key, data, &blob.WriterOptions{})
}

// storeBackoff is how a transient store failure is retried: 7 tries over
// about 6 seconds.
var storeBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 7}

// retryTransient runs f again while it fails with a transient error
// (Transient) and ctx is not done (client-go v0.37.2 util/retry.OnError).
func retryTransient(ctx context.Context, f func() error) error {
	return retryStore(ctx, storeBackoff, Transient, f)
}

// Transient reports a store failure worth trying again: a 5xx, 429 or 408
// answer, S3's 409 ConditionalRequestConflict (another conditional write
// to the key was in flight: AWS S3 User Guide, "Conditional writes"), a
// timeout or a dropped connection. A failed condition (412) is not: it is
// ErrConflict, and the caller re-reads and decides again.
func Transient(err error) bool {
	if err == nil || errors.Is(err, ErrConflict) || errors.Is(err, ErrExists) || errors.Is(err, ErrNotFound) {
		return false
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "ConditionalRequestConflict", "SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "OperationAborted":
			return true
		}
	}
	if code, ok := httpStatus(err); ok {
		return code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout ||
			(code == http.StatusConflict && ae != nil && ae.ErrorCode() == "ConditionalRequestConflict")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	// A body read apart from its ETag or checksum while the object was
	// replaced: reading again gets one version whole. The SDK's checksum
	// error is of an internal type (aws-sdk-go-v2
	// service/internal/checksum v1.11.7 algorithms.go validationError).
	if errors.Is(err, errTornRead) || strings.Contains(err.Error(), "checksum did not match") {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}

// httpStatus is the HTTP status of a service's answer in err.
func httpStatus(err error) (int, bool) {
	var hs interface{ HTTPStatusCode() int } // aws-sdk-go-v2 and smithy-go response errors
	if errors.As(err, &hs) {
		return hs.HTTPStatusCode(), true
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code, true
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode, true
	}
	return 0, false
}
