package deprecations

import (
	"bytes"
	"encoding/json"
)

// The JSON reader decodes each value once with encoding/json, which checks
// it; lists and the lines of fields are then read from the checked bytes
// by the walkers below. They replace a json.Decoder per list and per
// object that scanned every value again and copied it into buffers grown
// as they went (a tenth of a scan's allocations on the corpus).
// TestJSONWalkersAgreeWithDecoder holds them to the decoder on the corpus
// and on the fuzz seeds.

// jsonArray reports each value of raw, a JSON array that encoding/json
// has already checked, with the line it starts on.
func (s *ManifestScanner) jsonArray(name string, raw []byte, base, depth int, res *ManifestResult) {
	jsonItems(raw, func(item []byte, line int) {
		s.jsonValue(name, item, base+line-1, depth+1, res)
	})
}

// jsonItems calls fn with each value of the checked JSON array raw and
// the line (1-based, relative to raw) it starts on; nothing when raw is
// not an array.
func jsonItems(raw []byte, fn func(item []byte, line int)) {
	i := leadingSpace(raw)
	if i >= len(raw) || raw[i] != '[' {
		return
	}
	lines := lineCounter{data: raw}
	i++
	for {
		i += leadingSpace(raw[i:])
		if i >= len(raw) || raw[i] == ']' {
			return
		}
		end := jsonSkip(raw, i)
		fn(raw[i:end], lines.at(i))
		i = end + leadingSpace(raw[end:])
		if i >= len(raw) || raw[i] != ',' {
			return
		}
		i++
	}
}

type field struct {
	raw  []byte
	line int
}

// jsonField finds a top-level field of a checked JSON object (the first
// one of that name) and the line (1-based, relative to raw) its value
// starts on.
func jsonField(raw []byte, key string) *field {
	i := leadingSpace(raw)
	if i >= len(raw) || raw[i] != '{' {
		return nil
	}
	lines := lineCounter{data: raw}
	i++
	for {
		i += leadingSpace(raw[i:])
		if i >= len(raw) || raw[i] != '"' {
			return nil // "}" of the end, or not checked JSON
		}
		kend := jsonSkip(raw, i)
		k := raw[i+1 : kend-1]
		i = kend + leadingSpace(raw[kend:])
		if i >= len(raw) || raw[i] != ':' {
			return nil
		}
		i++
		i += leadingSpace(raw[i:])
		vend := jsonSkip(raw, i)
		if jsonKeyIs(k, key) {
			return &field{raw: raw[i:vend], line: lines.at(i)}
		}
		i = vend + leadingSpace(raw[vend:])
		if i >= len(raw) || raw[i] != ',' {
			return nil
		}
		i++
	}
}

// jsonKeyIs compares the inside of a JSON string with key, unescaping it
// first when it holds an escape ("api\u0056ersion" is apiVersion to the
// decoder too).
func jsonKeyIs(k []byte, key string) bool {
	if bytes.IndexByte(k, '\\') < 0 {
		return string(k) == key
	}
	var s string
	quoted := make([]byte, 0, len(k)+2)
	quoted = append(append(append(quoted, '"'), k...), '"')
	return json.Unmarshal(quoted, &s) == nil && s == key
}

// jsonSkip returns the offset just past the JSON value that starts at
// raw[i], which is checked JSON: a string, an object or array (brackets
// counted outside strings), or a literal or number up to the next
// delimiter.
func jsonSkip(raw []byte, i int) int {
	switch raw[i] {
	case '"':
		return jsonStringEnd(raw, i)
	case '{', '[':
		depth := 0
		for ; i < len(raw); i++ {
			switch raw[i] {
			case '"':
				i = jsonStringEnd(raw, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(raw)
	}
	for ; i < len(raw); i++ {
		switch raw[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
	}
	return len(raw)
}

// jsonStringEnd returns the offset just past the string that starts at
// raw[i] (a quote).
func jsonStringEnd(raw []byte, i int) int {
	for i++; i < len(raw); i++ {
		switch raw[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(raw)
}
