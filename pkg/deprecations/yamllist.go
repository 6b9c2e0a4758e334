package deprecations

import "bytes"

// listItems reads the items of a block-style List document (kind: List,
// ServiceList, ... with a block sequence under items) as node reads them
// after a full decode, without the decode: the objects, in order, with
// the same apiVersion, kind, metadata name and namespace and line. It is
// for documents plainYAML vouches for, where the structure is the lines'
// indentation alone and every scalar is plain or quoted without escapes.
//
// It returns false, having reported nothing, for anything it does not
// read exactly as the decode would: a key read twice (the decode keeps the
// last apiVersion or metadata but the first name), a flow or block value
// where a name is read, an item that is not a mapping, a List inside a
// List, or anything naming a Helm release record. The caller then decodes
// the document in full. Decoding Lists was an eighth of a corpus scan's
// allocations, yaml.v3's token queue above all.
// TestListItemsAgreesWithFullDecode and FuzzManifestScan hold this reader
// to the decode.
//
// base is the line before the document's first line.
func (s *ManifestScanner) listItems(name string, doc []byte, base int, res *ManifestResult) bool {
	if bytes.Contains(doc, []byte("release")) {
		return false // a Helm release record, or a label that may name one
	}
	type item struct {
		o                object
		seen             uint8 // apiVersion, kind, metadata, items, name, namespace
		avLine, kindLine int
		col, metaCol     int // the columns of the item's keys and its metadata's, once known
		inMeta           bool
	}
	const (
		seenAPIVersion = 1 << iota
		seenKind
		seenMetadata
		seenItems
		seenName
		seenNamespace
	)
	var (
		items    []item
		cur      *item
		topKind  string
		topSeen  uint8
		inItems  bool // reading the sequence under items
		seqCol   = -1 // the column of its dashes, once known
		line     = base
		itemsEnd bool // the sequence has ended
		// read is the column of the last key whose value was read: a
		// line indented past it continues that value on another line
		// (plainYAML admits multi-line scalars), which is left to the
		// decode.
		read = -1
	)
	// take reads the value v of a key at column col that may be seen only
	// once (bit in seen): false for a second one or a value the decode
	// would not read as listScalar does.
	take := func(seen *uint8, bit uint8, v []byte, col int) (string, bool) {
		if *seen&bit != 0 {
			return "", false
		}
		*seen |= bit
		val, ok := listScalar(v)
		if ok && val != "" {
			read = col
		}
		return val, ok
	}
	// itemKey reads a key of the item's mapping.
	itemKey := func(it *item, t []byte, line int) bool {
		k, v, ok := splitKey(t)
		if !ok {
			return false
		}
		it.inMeta = false
		var bit uint8
		switch string(k) {
		case "apiVersion":
			bit = seenAPIVersion
		case "kind":
			bit = seenKind
		case "metadata":
			bit = seenMetadata
		case "items":
			bit = seenItems
		default:
			return true
		}
		val, ok := take(&it.seen, bit, v, it.col)
		if !ok {
			return false
		}
		switch bit {
		case seenAPIVersion:
			it.o.apiVersion, it.avLine = val, line
		case seenKind:
			it.o.kind, it.kindLine = val, line
		case seenMetadata:
			if val != "" {
				return false // metadata that is not a block mapping
			}
			it.inMeta, it.metaCol = true, -1
		}
		return true
	}
	for off := 0; off < len(doc); {
		end := bytes.IndexByte(doc[off:], '\n')
		var l []byte
		if end < 0 {
			l, off = doc[off:], len(doc)
		} else {
			l, off = doc[off:off+end], off+end+1
		}
		line++
		l = trimCR(l)
		t := trimIndent(l)
		if len(t) == 0 || t[0] == '#' {
			continue
		}
		ind := len(l) - len(t)
		if read >= 0 && ind > read {
			return false
		}
		read = -1
		dash := t[0] == '-' && (len(t) == 1 || t[1] == ' ')
		if inItems && !itemsEnd {
			switch {
			case seqCol < 0 && dash:
				seqCol = ind
				fallthrough
			case ind == seqCol && dash:
				items = append(items, item{col: -1, metaCol: -1})
				cur = &items[len(items)-1]
				rest := trimIndent(t[1:])
				if len(rest) == 0 {
					continue // the item's keys start on the next line
				}
				if rest[0] == '-' || rest[0] == '#' {
					return false // a sequence in a sequence, or a comment in place of an item
				}
				cur.col = ind + len(t) - len(rest)
				if !itemKey(cur, rest, line) {
					return false
				}
				continue
			case seqCol < 0:
				return false // items holds a mapping or a scalar, not a sequence
			case ind <= seqCol:
				if ind != 0 || dash {
					return false
				}
				itemsEnd = true // a top-level key after the sequence
			default:
				if cur.col < 0 {
					cur.col = ind
				}
				switch {
				case ind < cur.col:
					return false
				case ind == cur.col:
					if dash {
						continue // an indentless sequence under the item's last key
					}
					if !itemKey(cur, t, line) {
						return false
					}
				case cur.inMeta:
					if cur.metaCol < 0 {
						cur.metaCol = ind
					}
					if ind < cur.metaCol {
						return false
					}
					if ind > cur.metaCol || dash {
						continue
					}
					k, v, ok := splitKey(t)
					if !ok {
						return false
					}
					var bit uint8
					switch string(k) {
					case "name":
						bit = seenName
					case "namespace":
						bit = seenNamespace
					default:
						continue
					}
					val, ok := take(&cur.seen, bit, v, ind)
					if !ok {
						return false
					}
					if bit == seenName {
						cur.o.name = val
					} else {
						cur.o.namespace = val
					}
				}
				continue
			}
		}
		// A top-level line, or one under a top-level key other than items.
		if ind != 0 {
			continue
		}
		if dash {
			return false // a top-level sequence item outside items
		}
		k, v, ok := splitKey(t)
		if !ok {
			return false
		}
		switch string(k) {
		case "kind":
			if topKind, ok = take(&topSeen, seenKind, v, 0); !ok {
				return false
			}
		case "items":
			if val, ok := take(&topSeen, seenItems, v, 0); !ok || val != "" {
				return false // items: [] or a scalar
			}
			inItems = true
		}
	}
	if !isListKind(topKind) || len(items) == 0 {
		return false
	}
	for i := range items {
		it := &items[i]
		if it.col < 0 {
			return false // an empty item: null, not a mapping
		}
		if it.seen&seenItems != 0 && isListKind(it.o.kind) {
			return false // a List inside a List
		}
	}
	for _, it := range items {
		if it.o.apiVersion == "" && it.o.kind == "" {
			continue
		}
		it.o.line = it.avLine
		if it.avLine == 0 || (it.kindLine != 0 && it.kindLine < it.avLine) {
			it.o.line = it.kindLine
		}
		s.emit(name, it.o, res)
	}
	return true
}

// listScalar reads the value after "key:" as the decode would give it to
// scalar: a plain scalar without its comment, a quoted one without its
// quotes (plainYAML admits no escapes), "" for nothing. It returns false
// for a flow collection or a block scalar, which scalar reads as "" and
// cleanValue would not.
func listScalar(v []byte) (string, bool) {
	v = bytes.Trim(v, " ")
	if len(v) == 0 || v[0] == '#' {
		return "", true
	}
	switch v[0] {
	case '[', '{', '|', '>', '&', '*', '!':
		return "", false
	}
	return cleanValue(v), true
}
