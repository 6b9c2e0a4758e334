package deprecations

import "bytes"

// plainYAML reports whether doc is certainly valid YAML because it keeps
// to a small block-style subset that every parser reads alike: nested
// mappings of simple or simply quoted keys and sequences, each value a
// plain scalar (see safeScalar), a simple quoted string, [] or {}, a
// one-line flow sequence of such scalars (see flowSeq), or a literal or
// folded block scalar (after a key or as a sequence item), optionally followed by a comment; spaces for
// indentation, printable ASCII only. It answers false for anything else,
// which the caller then hands to the full YAML parser: false means "do
// not know", never "invalid". It exists because parsing each document
// with a finding in full, only to report whether it parses, cost a sixth
// of a scan; most manifests keep to this subset. Duplicate keys are not
// looked for: the parser that decides (into a yaml.Node) accepts them
// too, and a set of keys per mapping cost a tenth of a scan's
// allocations. TestPlainYAMLAgreesWithParser and FuzzPlainYAML hold it to
// the parser's verdict.
func plainYAML(doc []byte) bool {
	type level struct {
		col        int
		seq        bool
		indentless bool
	}
	var (
		stack   []level
		pending = -1 // column of the mapping whose last key has no value yet
		block   = -1 // column of the mapping holding a block scalar being read
		blockIn = -1 // the block scalar's content indentation, once known
		// Multi-line scalars, as YAML writers wrap long descriptions:
		// plain is the column of the mapping whose last value is a plain
		// scalar that lines indented past it continue; quoted that of the
		// mapping whose single-quoted value has not closed yet.
		plain  = -1
		quoted = -1
	)
	top := func() *level { return &stack[len(stack)-1] }
	// value checks what follows "key:" on a line of the mapping at col.
	value := func(v []byte, col int) bool {
		v = bytes.Trim(v, " ")
		switch {
		case len(v) == 0:
			pending = col
			return true
		case len(v) <= 2 && (v[0] == '|' || v[0] == '>') && (len(v) == 1 || v[1] == '-' || v[1] == '+'):
			block, blockIn = col, -1
			return true
		case v[0] == '\'' && bytes.IndexByte(v[1:], '\'') < 0:
			quoted = col // closes on a later line
			return true
		}
		if !safeValue(v) {
			return false
		}
		if v[0] != '[' && v[0] != '{' && v[0] != '"' && v[0] != '\'' && !bytes.Contains(v, []byte(" #")) {
			plain = col
		}
		return true
	}
	for off := 0; off < len(doc); {
		end := bytes.IndexByte(doc[off:], '\n')
		var line []byte
		if end < 0 {
			line, off = doc[off:], len(doc)
		} else {
			line, off = doc[off:off+end], off+end+1
		}
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		for _, c := range line {
			if c < 0x20 || c > 0x7e {
				return false // tabs, control characters, non-ASCII: the parser decides
			}
		}
		t := bytes.TrimLeft(line, " ")
		ind := len(line) - len(t)
		if block >= 0 {
			if len(t) == 0 {
				if blockIn < 0 && ind > 0 {
					return false // leading blank lines with spaces: the parser decides
				}
				continue
			}
			if blockIn < 0 {
				if ind <= block {
					block = -1 // an empty block scalar
				} else {
					blockIn = ind
					continue
				}
			} else if ind >= blockIn {
				continue
			} else if ind > block {
				return false
			} else {
				block = -1
			}
		}
		if quoted >= 0 {
			// Inside a single-quoted scalar: any text, up to the quote that
			// closes it, then nothing or a comment. '' (an escaped quote)
			// and lines not indented past the mapping go to the parser.
			if len(t) == 0 {
				continue
			}
			if ind <= quoted {
				return false
			}
			if q := bytes.IndexByte(t, '\''); q >= 0 {
				if !comment(t[q+1:]) {
					return false
				}
				quoted = -1
			}
			continue
		}
		if plain >= 0 && len(t) > 0 {
			if t[0] == '#' || ind <= plain {
				plain = -1 // a comment or the next key ends the scalar
			} else {
				// A continuation line: text that could start a plain
				// scalar, with no ": " or " #" in it.
				if r := bytes.TrimRight(t, " "); r[0] == '[' || r[0] == '{' || r[0] == '"' || r[0] == '\'' || !safeScalar(r) {
					return false
				}
				continue
			}
		}
		if len(t) == 0 || t[0] == '#' {
			continue
		}
		if len(stack) == 0 {
			if ind != 0 {
				return false
			}
			stack = append(stack, level{col: 0})
		}
		seqItem := t[0] == '-' && (len(t) == 1 || t[1] == ' ')
		if pending >= 0 {
			p := pending
			pending = -1
			switch {
			case ind > p:
				stack = append(stack, level{col: ind, seq: seqItem})
			case ind == p && seqItem && !top().seq && top().col == p:
				stack = append(stack, level{col: ind, seq: true, indentless: true})
			}
		}
		for len(stack) > 0 && top().col > ind {
			stack = stack[:len(stack)-1]
		}
		if len(stack) == 0 || top().col != ind {
			return false
		}
		if top().indentless && !seqItem {
			stack = stack[:len(stack)-1]
			if len(stack) == 0 || top().col != ind {
				return false
			}
		}
		l := top()
		if l.seq != seqItem {
			return false
		}
		if !seqItem {
			v, ok := plainKey(t)
			if !ok || !value(v, ind) {
				return false
			}
			continue
		}
		// "- item": a scalar, or the first key of a mapping.
		rest := bytes.TrimLeft(t[1:], " ")
		if len(rest) == 0 || rest[0] == '#' || (rest[0] == '-' && (len(rest) == 1 || rest[1] == ' ')) {
			return false // nothing, a comment, or a nested sequence: the parser decides
		}
		if r := bytes.TrimRight(rest, " "); len(r) <= 2 && (r[0] == '|' || r[0] == '>') && (len(r) == 1 || r[1] == '-' || r[1] == '+') {
			// "- |": a block scalar as the item, its content indented
			// past the dash as past a key.
			block, blockIn = ind, -1
			continue
		}
		col := ind + (len(t) - len(rest))
		if v, ok := plainKey(rest); ok {
			stack = append(stack, level{col: col})
			if !value(v, col) {
				return false
			}
			continue
		}
		if !safeValue(bytes.TrimRight(rest, " ")) {
			return false
		}
	}
	return len(stack) > 0 && quoted < 0
}

// maxPlainKey bounds the keys plainYAML accepts: the parser takes a key
// only within 1,024 characters of where it starts ("could not find
// expected ':'" past that, quotes counted), so longer ones are left to it.
const maxPlainKey = 1000

// plainKey returns what follows the key of "key:" or "key: value" where
// key is of letters, digits and _ . / - (not first), or is quoted without
// escapes or inner quotes ("helm.sh/hook": ...).
func plainKey(t []byte) ([]byte, bool) {
	i := 0
	if len(t) > 0 && (t[0] == '"' || t[0] == '\'') {
		end := bytes.IndexByte(t[1:], t[0])
		if end <= 0 || (t[0] == '"' && bytes.IndexByte(t[1:end+1], '\\') >= 0) {
			return nil, false
		}
		i = end + 2
		if i > maxPlainKey || i >= len(t) || t[i] != ':' || (i+1 < len(t) && t[i+1] != ' ') {
			return nil, false
		}
		return t[i+1:], true
	}
	for i < len(t) {
		c := t[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '/' || (c == '-' && i > 0) {
			i++
			continue
		}
		break
	}
	if i == 0 || i > maxPlainKey || i >= len(t) || t[i] != ':' {
		return nil, false
	}
	if i+1 < len(t) && t[i+1] != ' ' {
		return nil, false
	}
	return t[i+1:], true
}

// safeScalar reports whether v (trimmed, non-empty) is a scalar that
// parses whatever it holds: [] or {}, a double-quoted string without
// escapes or inner quotes, a single-quoted one without inner quotes, or a
// plain scalar. A plain scalar starts with a letter, digit or one of
// _ / . ( $, or with - or -- before a letter or digit (command-line flags:
// "-f", "--v=2"); after that, in block context, only ": " and " #" (and
// a colon at the end) mean something to YAML.
func safeScalar(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	switch v[0] {
	case '[', '{':
		return len(v) == 2 && (v[1] == ']' && v[0] == '[' || v[1] == '}' && v[0] == '{')
	case '"':
		return len(v) >= 2 && v[len(v)-1] == '"' && bytes.IndexAny(v[1:len(v)-1], "\"\\") < 0
	case '\'':
		return len(v) >= 2 && v[len(v)-1] == '\'' && bytes.IndexByte(v[1:len(v)-1], '\'') < 0
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	c := v[0]
	switch {
	case alnum(c) || c == '_' || c == '/' || c == '.' || c == '(' || c == '$':
	case c == '-' && len(v) > 1 && alnum(v[1]):
	case c == '-' && len(v) > 2 && v[1] == '-' && alnum(v[2]):
	default:
		return false
	}
	if bytes.Contains(v, []byte(" #")) || bytes.Contains(v, []byte(": ")) || v[len(v)-1] == ':' {
		return false
	}
	return true
}

// safeValue reports whether v (trimmed, non-empty), what follows "key:"
// or "- ", parses whatever it holds: a scalar safeScalar takes or a
// one-line flow sequence flowSeq takes, then nothing or a comment. A
// comment starts at " #" in a plain scalar, and after a quoted scalar or
// a flow sequence only where a space comes first ("x"#c is left to the
// parser).
func safeValue(v []byte) bool {
	switch v[0] {
	case '[':
		n, ok := flowSeq(v)
		return ok && comment(v[n:])
	case '"', '\'':
		end := bytes.IndexByte(v[1:], v[0])
		if end < 0 {
			return false
		}
		return safeScalar(v[:end+2]) && comment(v[end+2:])
	}
	if i := bytes.Index(v, []byte(" #")); i >= 0 {
		v = bytes.TrimRight(v[:i], " ")
		if len(v) == 0 {
			return false
		}
	}
	return safeScalar(v)
}

// comment reports whether rest, what follows a value on its line, is
// nothing or spaces and a comment.
func comment(rest []byte) bool {
	if len(rest) == 0 {
		return true
	}
	t := bytes.TrimLeft(rest, " ")
	return len(t) < len(rest) && len(t) > 0 && t[0] == '#'
}

// flowSeq reads a flow sequence that closes on its line, [ "a", 'b', c ]:
// items double-quoted without escapes or inner quotes, single-quoted
// without inner quotes, or plain of letters, digits and _ . / - (a letter
// or digit first); commas between them, none after the last. It returns
// the length read up to and with the closing bracket. Such sequences
// ("command: [ \"/bin/sh\", \"-c\" ]") kept a tenth of the documents with a
// finding from the shortcut.
func flowSeq(v []byte) (int, bool) {
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	i := 1
	skip := func() {
		for i < len(v) && v[i] == ' ' {
			i++
		}
	}
	skip()
	if i < len(v) && v[i] == ']' {
		return i + 1, true
	}
	for {
		if i >= len(v) {
			return 0, false
		}
		switch c := v[i]; {
		case c == '"' || c == '\'':
			end := bytes.IndexByte(v[i+1:], c)
			if end < 0 || (c == '"' && bytes.IndexByte(v[i+1:i+1+end], '\\') >= 0) {
				return 0, false
			}
			i += end + 2
		case alnum(c):
			for i < len(v) && (alnum(v[i]) || v[i] == '_' || v[i] == '.' || v[i] == '/' || v[i] == '-') {
				i++
			}
		default:
			return 0, false
		}
		skip()
		if i >= len(v) {
			return 0, false
		}
		switch v[i] {
		case ']':
			return i + 1, true
		case ',':
			i++
			skip()
		default:
			return 0, false
		}
	}
}
