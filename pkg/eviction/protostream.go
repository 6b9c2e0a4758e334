package eviction

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	restwatch "k8s.io/client-go/rest/watch"
)

// A watch-list stream in protobuf is a sequence of frames, each a 4-byte
// big-endian length and a metav1.WatchEvent message {type 1, object 2},
// whose object is a runtime.RawExtension {raw 1} holding the object in the
// protobuf envelope: the magic "k8s\x00" and a runtime.Unknown {typeMeta 1,
// raw 2, contentEncoding 3, contentType 4}
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf/protobuf.go and the
// generated.proto files of meta/v1 and runtime, v0.37.2).
var protoMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// maxFrame bounds one watch event, as a guard against a corrupt length.
const maxFrame = 256 << 20

// jsonWatcher reads a JSON watch stream, of which br has buffered the
// start, with client-go's decoders (as rest.Request.Watch would).
func jsonWatcher(body io.ReadCloser, br *bufio.Reader) watch.Interface {
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	frames := info.StreamSerializer.Framer.NewFrameReader(readCloser{br, body})
	dec := restwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), scheme.Codecs.UniversalDeserializer())
	return watch.NewStreamWatcher(dec, apierrors.NewClientErrorReporter(http.StatusInternalServerError, http.MethodGet, "ClientWatchDecoding"))
}

type readCloser struct {
	io.Reader
	io.Closer
}

// openRawWatch starts a watch-list request through rc (so that client-go's
// authentication, user agent, throttling and error statuses all apply) and
// returns the response body unread.
func openRawWatch(ctx context.Context, rc rest.Interface, namespace, resource string, o metav1.ListOptions) (io.ReadCloser, error) {
	o.Watch = true
	return rc.Get().Namespace(namespace).Resource(resource).VersionedParams(&o, scheme.ParameterCodec).Stream(ctx)
}

// readProtoWatch reads a protobuf watch-list stream from body up to its
// initial-events-end bookmark, handing each ADDED object's message (the
// bytes inside the envelope, valid only during the call) to added. It
// returns // the server's error for an ERROR event, and errStreamEnded when it ends
// before the bookmark.
func readProtoWatch(ctx context.Context, body io.Reader, added func(raw []byte) error) error {
	br, ok := body.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(body, 256<<10)
	}
	var buf []byte
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var hdr [4]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return errStreamEnded
			}
			return err
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > maxFrame {
			return fmt.Errorf("watch event of %d bytes: corrupt stream", n)
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n, max(int(n), 2*cap(buf)))
		}
		buf = buf[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return errStreamEnded
			}
			return err
		}
		typ, obj, err := splitWatchEvent(buf)
		if err != nil {
			return err
		}
		switch typ {
		case "ADDED":
			raw, err := unwrapProto(obj)
			if err != nil {
				return err
			}
			if err := added(raw); err != nil {
				return err
			}
		case "BOOKMARK":
			o, err := runtime.Decode(scheme.Codecs.UniversalDeserializer(), obj)
			if err != nil {
				return fmt.Errorf("decoding bookmark: %w", err)
			}
			if m, err := meta.Accessor(o); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				return nil
			}
		case "ERROR":
			o, err := runtime.Decode(scheme.Codecs.UniversalDeserializer(), obj)
			if err != nil {
				return fmt.Errorf("decoding watch error: %w", err)
			}
			return apierrors.FromObject(o)
		}
	}
}

// splitWatchEvent returns a WatchEvent's type and its object's raw bytes.
func splitWatchEvent(b []byte) (typ string, obj []byte, err error) {
	err = eachField(b, func(num int, wt wireType, v []byte, _ uint64) error {
		if wt != wireBytes {
			return nil
		}
		switch num {
		case 1:
			typ = string(v)
		case 2:
			return eachField(v, func(num int, wt wireType, v []byte, _ uint64) error {
				if num == 1 && wt == wireBytes {
					obj = v
				}
				return nil
			})
		}
		return nil
	})
	if err == nil && typ == "" {
		err = errors.New("watch event without a type")
	}
	return typ, obj, err
}

// unwrapProto returns the message inside the protobuf envelope.
func unwrapProto(obj []byte) ([]byte, error) {
	if !bytes.HasPrefix(obj, protoMagic) {
		return nil, errors.New("watch event object is not in the protobuf envelope")
	}
	var raw []byte
	var encoding string
	err := eachField(obj[len(protoMagic):], func(num int, wt wireType, v []byte, _ uint64) error {
		if wt != wireBytes {
			return nil
		}
		switch num {
		case 2:
			raw = v
		case 3:
			encoding = string(v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if encoding != "" {
		return nil, fmt.Errorf("watch event object has content encoding %q", encoding)
	}
	return raw, nil
}
