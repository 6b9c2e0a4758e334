package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
)

// WriteJSONItems prints a report as PrintStructured does with -o json, byte
// for byte, for reports with one long list: head is the report with that
// list left nil (so it encodes as `"items": null`), items is the list. The
// items are encoded in chunks on every CPU and written in order as they
// are ready, so a report of tens of thousands of entries neither sits in
// memory whole as one buffer (twice, while the buffer grows) nor waits on
// one core.
func WriteJSONItems[T any](w io.Writer, head any, items []T) error {
	const hole = `"items": null`
	b, err := marshalIndent(head, "")
	if err != nil {
		return fmt.Errorf("encoding report: %w", err)
	}
	i := bytes.Index(b, []byte(hole))
	if i < 0 || bytes.Contains(b[i+len(hole):], []byte(hole)) {
		return fmt.Errorf("encoding report: want one null items field")
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.Write(b[:i])
	if items == nil {
		bw.Write(b[i:])
		bw.WriteByte('\n')
		return flush(bw)
	}
	bw.WriteString(`"items": [`)
	if err := encodeItems(bw, items); err != nil {
		return err
	}
	if len(items) > 0 {
		bw.WriteString("\n  ")
	}
	bw.WriteByte(']')
	bw.Write(b[i+len(hole):])
	bw.WriteByte('\n')
	return flush(bw)
}

func flush(bw *bufio.Writer) error {
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	return nil
}

// marshalIndent is json.MarshalIndent(v, prefix, "  ") without HTML
// escaping, like every report of the suite: "->" stays "->".
func marshalIndent(v any, prefix string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// itemChunk is how many items one encoding task takes.
const itemChunk = 1024

// encodeItems writes the items, comma-separated and indented as inside
// the report, encoding up to GOMAXPROCS chunks at once.
func encodeItems[T any](w io.Writer, items []T) error {
	type chunk struct {
		buf []byte
		err error
	}
	n := (len(items) + itemChunk - 1) / itemChunk
	workers := max(1, min(runtime.GOMAXPROCS(0), n))
	// One result channel per chunk, handed to the writer in order; at most
	// 2*workers chunks are encoded ahead of the writer.
	results := make(chan chan chunk, 2*workers)
	// Buffers the writer is done with, for the next chunks: a chunk of
	// 1,024 items is about a megabyte, and fresh memory for each one cost
	// more (zeroing and page faults) than encoding into it.
	free := make(chan []byte, 2*workers+2)
	go func() {
		defer close(results)
		sem := make(chan struct{}, workers)
		for c := 0; c < n; c++ {
			done := make(chan chunk, 1)
			results <- done
			sem <- struct{}{}
			go func(c int) {
				defer func() { <-sem }()
				// One encoder per chunk: it keeps its buffers from item
				// to item.
				var buf *bytes.Buffer
				select {
				case b := <-free:
					buf = bytes.NewBuffer(b[:0])
				default:
					buf = new(bytes.Buffer)
				}
				enc := json.NewEncoder(buf)
				enc.SetEscapeHTML(false)
				enc.SetIndent("    ", "  ")
				first, end := c*itemChunk, min((c+1)*itemChunk, len(items))
				for k := first; k < end; k++ {
					if k > 0 {
						buf.WriteByte(',')
					}
					buf.WriteString("\n    ")
					if err := enc.Encode(&items[k]); err != nil {
						done <- chunk{err: fmt.Errorf("encoding report: %w", err)}
						return
					}
					buf.Truncate(buf.Len() - 1) // the newline Encode ends with
					if k == first {
						// Room for the rest, guessed from the first item
						// (at most 4 MiB: one item may be far larger than
						// the others).
						buf.Grow(min(buf.Len()*(end-first-1), 4<<20))
					}
				}
				done <- chunk{buf: buf.Bytes()}
			}(c)
		}
	}()
	var first error
	for done := range results {
		c := <-done
		if first != nil {
			continue
		}
		if c.err != nil {
			first = c.err
			continue
		}
		if _, err := w.Write(c.buf); err != nil {
			first = fmt.Errorf("writing report: %w", err)
		}
		select {
		case free <- c.buf:
		default:
		}
	}
	return first
}
