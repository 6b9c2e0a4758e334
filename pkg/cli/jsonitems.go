package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
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
	var buf appendWriter
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	src := bytes.TrimSuffix(buf, []byte("\n"))
	// Sized once with room for the indentation (a third more on a report
	// of short fields): growing the slice from nothing copied a report
	// with thousands of notScanned entries over and over.
	return appendIndented(make([]byte, 0, len(src)+len(src)/2), src, prefix, "  "), nil
}

// appendWriter keeps what is written to it. An Encoder writes a value in
// one Write: this copies it into a slice of its size, where a
// bytes.Buffer zeroed a buffer of that size first (2.5% of the CPU of a
// deprecations report of the corpus x10, whose head is 0.8 MB).
type appendWriter []byte

func (w *appendWriter) Write(p []byte) (int, error) {
	*w = append(*w, p...)
	return len(p), nil
}

// appendIndented appends src, one JSON value as encoding/json writes it
// compact (nothing between tokens), indented as json.Indent indents it:
// a newline, prefix and one indent per level after each opening bracket
// and comma, "{}" and "[]" for empty ones, a space after each colon.
// json.Indent runs its general scanner's state machine on every byte; on
// a report of thousands of findings that was more than half the cost of
// encoding it, where this copies each string in one piece.
func appendIndented(dst, src []byte, prefix, indent string) []byte {
	depth := 0
	open := false // after { or [, until the next byte says whether it is empty
	for i := 0; i < len(src); i++ {
		c := src[i]
		if open && c != '}' && c != ']' {
			open = false
			depth++
			dst = appendNewline(dst, prefix, indent, depth)
		}
		switch c {
		case '"':
			end := stringEnd(src, i)
			dst = append(dst, src[i:end]...)
			i = end - 1
		case '{', '[':
			open = true
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			dst = appendNewline(dst, prefix, indent, depth)
		case ':':
			dst = append(dst, c, ' ')
		case '}', ']':
			if open {
				open = false
			} else {
				depth--
				dst = appendNewline(dst, prefix, indent, depth)
			}
			dst = append(dst, c)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// stringEnd returns the offset just past the JSON string that starts at
// src[start] (a quote); len(src) when it is not closed.
func stringEnd(src []byte, start int) int {
	i := start + 1
	for {
		q := bytes.IndexByte(src[i:], '"')
		if q < 0 {
			return len(src)
		}
		i += q
		// A quote after an odd number of backslashes is escaped.
		n := 0
		for j := i - 1; j > start && src[j] == '\\'; j-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
}

func appendNewline(dst []byte, prefix, indent string, depth int) []byte {
	dst = append(dst, '\n')
	dst = append(dst, prefix...)
	for i := 0; i < depth; i++ {
		dst = append(dst, indent...)
	}
	return dst
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
				var out []byte
				select {
				case b := <-free:
					out = b[:0]
				default:
				}
				// One encoder per chunk: it keeps its buffers from item
				// to item. Each item is encoded compact, then indented
				// into the chunk (see appendIndented).
				var compact bytes.Buffer
				enc := json.NewEncoder(&compact)
				enc.SetEscapeHTML(false)
				first, end := c*itemChunk, min((c+1)*itemChunk, len(items))
				for k := first; k < end; k++ {
					if k > 0 {
						out = append(out, ',')
					}
					out = append(out, "\n    "...)
					compact.Reset()
					if err := enc.Encode(&items[k]); err != nil {
						done <- chunk{err: fmt.Errorf("encoding report: %w", err)}
						return
					}
					out = appendIndented(out, bytes.TrimSuffix(compact.Bytes(), []byte("\n")), "    ", "  ")
					if k == first {
						// Room for the rest, guessed from the first item
						// (at most 4 MiB: one item may be far larger than
						// the others).
						out = slices.Grow(out, min(len(out)*(end-first-1), 4<<20))
					}
				}
				done <- chunk{buf: out}
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
