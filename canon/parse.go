package canon

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/text/unicode/norm"
)

// kind is the JSON type of a parsed node.
type kind uint8

const (
	kNull kind = iota
	kBool
	kNumber
	kString
	kArray
	kObject
)

// node is one parsed JSON value. Strings are NFC-normalized, numbers are
// already in their canonical spelling, object members are sorted by key.
type node struct {
	kind kind
	key  string // the member's key, when the node is an object member
	s    string // kString: the value; kNumber: canonical literal; kBool: "true"/"false"
	kids []node // members of a kObject (sorted by key code point) or elements of a kArray
}

// seg is one step of a path while parsing: an object key or an array index.
type seg struct {
	key   string
	index int // -1 for a key
}

// parser is a strict RFC 8259 parser that also enforces the limits, rejects
// duplicate keys and invalid UTF-8, and records where it is so that errors
// can name the path. It never panics on any input.
type parser struct {
	in     []byte
	pos    int
	lim    limits
	leaves int
	path   []seg
	buf    []byte // scratch for unescaping
	stack  []node // children of the open containers, copied out exactly sized at close
	raw    bool   // keep strings as written (no NFC): for the JSON text inside a string
}

type limits struct {
	maxDepth, maxLeaves, maxString int
}

func (p *parser) fail(sentinel error, format string, args ...any) error {
	return &Error{Path: formatSegs(p.path), Offset: p.pos, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

func (p *parser) skipWS() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// parseDocument parses one complete JSON text: a value with only whitespace
// around it.
func (p *parser) parseDocument() (node, error) {
	p.skipWS()
	n, err := p.value(1)
	if err != nil {
		return node{}, err
	}
	p.skipWS()
	if p.pos != len(p.in) {
		return node{}, p.fail(ErrSyntax, "unexpected %s after the value", p.describe())
	}
	return n, nil
}

func (p *parser) describe() string {
	if p.pos >= len(p.in) {
		return "end of input"
	}
	c := p.in[p.pos]
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (p *parser) value(depth int) (node, error) {
	if p.pos >= len(p.in) {
		return node{}, p.fail(ErrSyntax, "unexpected end of input, want a value")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		if err := p.leaf(); err != nil {
			return node{}, err
		}
		s, err := p.str()
		return node{kind: kString, s: s}, err
	case c == '-' || (c >= '0' && c <= '9'):
		if err := p.leaf(); err != nil {
			return node{}, err
		}
		start := p.pos
		lit, err := scanNumber(p.in, &p.pos)
		if err != nil {
			p.pos = start
			return node{}, p.fail(ErrSyntax, "%v", err)
		}
		s, err := canonicalNumber(lit)
		if err != nil {
			p.pos = start
			return node{}, p.fail(ErrNumberRange, "%v", err)
		}
		return node{kind: kNumber, s: s}, nil
	case c == 't':
		return p.literal("true", node{kind: kBool, s: "true"})
	case c == 'f':
		return p.literal("false", node{kind: kBool, s: "false"})
	case c == 'n':
		return p.literal("null", node{kind: kNull})
	default:
		return node{}, p.fail(ErrSyntax, "unexpected %s, want a value", p.describe())
	}
}

func (p *parser) literal(word string, n node) (node, error) {
	if len(p.in)-p.pos < len(word) || string(p.in[p.pos:p.pos+len(word)]) != word {
		return node{}, p.fail(ErrSyntax, "invalid literal, want %s", word)
	}
	if err := p.leaf(); err != nil {
		return node{}, err
	}
	p.pos += len(word)
	return n, nil
}

// leaf counts one more leaf against the limit.
func (p *parser) leaf() error {
	p.leaves++
	if p.leaves > p.lim.maxLeaves {
		return p.fail(ErrTooManyLeaves, "more than %d leaves", p.lim.maxLeaves)
	}
	return nil
}

func (p *parser) enter(depth int) error {
	if depth > p.lim.maxDepth {
		return p.fail(ErrTooDeep, "nested deeper than %d levels", p.lim.maxDepth)
	}
	return nil
}

func (p *parser) object(depth int) (node, error) {
	if err := p.enter(depth); err != nil {
		return node{}, err
	}
	p.pos++ // '{'
	p.skipWS()
	n := node{kind: kObject}
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return n, p.leaf() // an empty object is a leaf of its own
	}
	base := len(p.stack)
	for {
		p.skipWS()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return node{}, p.fail(ErrSyntax, "unexpected %s, want an object key", p.describe())
		}
		key, err := p.str()
		if err != nil {
			return node{}, err
		}
		p.skipWS()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return node{}, p.fail(ErrSyntax, "unexpected %s after key %q, want ':'", p.describe(), key)
		}
		p.pos++
		p.skipWS()
		p.path = append(p.path, seg{key: key, index: -1})
		v, err := p.value(depth + 1)
		if err != nil {
			return node{}, err
		}
		p.path = p.path[:len(p.path)-1]
		v.key = key
		p.stack = append(p.stack, v)
		p.skipWS()
		if p.pos >= len(p.in) {
			return node{}, p.fail(ErrSyntax, "unexpected end of input, want ',' or '}'")
		}
		if p.in[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.in[p.pos] == '}' {
			p.pos++
			break
		}
		return node{}, p.fail(ErrSyntax, "unexpected %s, want ',' or '}'", p.describe())
	}
	n.kids = p.pop(base)
	slices.SortFunc(n.kids, func(a, b node) int { return cmp.Compare(a.key, b.key) })
	for i := 1; i < len(n.kids); i++ {
		if n.kids[i].key == n.kids[i-1].key {
			return node{}, p.fail(ErrDuplicateKey, "duplicate key %q", n.kids[i].key)
		}
	}
	return n, nil
}

// pop moves the children collected since base into an exactly sized slice.
func (p *parser) pop(base int) []node {
	kids := make([]node, len(p.stack)-base)
	copy(kids, p.stack[base:])
	clear(p.stack[base:])
	p.stack = p.stack[:base]
	return kids
}

func (p *parser) array(depth int) (node, error) {
	if err := p.enter(depth); err != nil {
		return node{}, err
	}
	p.pos++ // '['
	p.skipWS()
	n := node{kind: kArray}
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return n, p.leaf()
	}
	base := len(p.stack)
	for i := 0; ; i++ {
		p.skipWS()
		p.path = append(p.path, seg{index: i})
		v, err := p.value(depth + 1)
		if err != nil {
			return node{}, err
		}
		p.path = p.path[:len(p.path)-1]
		p.stack = append(p.stack, v)
		p.skipWS()
		if p.pos >= len(p.in) {
			return node{}, p.fail(ErrSyntax, "unexpected end of input, want ',' or ']'")
		}
		if p.in[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.in[p.pos] == ']' {
			p.pos++
			n.kids = p.pop(base)
			return n, nil
		}
		return node{}, p.fail(ErrSyntax, "unexpected %s, want ',' or ']'", p.describe())
	}
}

// str parses a JSON string at p.pos (which holds '"') and returns its value
// in Unicode NFC. Invalid UTF-8, control characters, bad escapes and lone
// UTF-16 surrogates are errors: nothing is replaced silently.
func (p *parser) str() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	ascii := true
	// Fast path: no escapes.
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == '"' {
			raw := p.in[start:p.pos]
			p.pos++
			return p.finishString(raw, ascii, true)
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.fail(ErrSyntax, "control character 0x%02x in string", c)
		}
		if c >= 0x80 {
			ascii = false
		}
		p.pos++
	}
	if p.pos >= len(p.in) {
		return "", p.fail(ErrSyntax, "unterminated string")
	}
	// Slow path: unescape into the scratch buffer.
	b := append(p.buf[:0], p.in[start:p.pos]...)
	for {
		if p.pos >= len(p.in) {
			return "", p.fail(ErrSyntax, "unterminated string")
		}
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			p.buf = b
			return p.finishString(b, ascii, false)
		case c < 0x20:
			return "", p.fail(ErrSyntax, "control character 0x%02x in string", c)
		case c != '\\':
			if c >= 0x80 {
				ascii = false
			}
			b = append(b, c)
			p.pos++
			continue
		}
		// An escape.
		if p.pos+1 >= len(p.in) {
			return "", p.fail(ErrSyntax, "unterminated string")
		}
		e := p.in[p.pos+1]
		p.pos += 2
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.fail(ErrSyntax, "invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				// Must be a high surrogate followed by an escaped low one.
				var r2 rune = -1
				if r < 0xdc00 && p.pos+1 < len(p.in) && p.in[p.pos] == '\\' && p.in[p.pos+1] == 'u' {
					p.pos += 2
					var ok2 bool
					if r2, ok2 = p.hex4(); !ok2 {
						return "", p.fail(ErrSyntax, "invalid \\u escape")
					}
				}
				dec := utf16.DecodeRune(r, r2)
				if dec == utf8.RuneError {
					return "", p.fail(ErrInvalidUTF8, "lone UTF-16 surrogate in \\u escape")
				}
				r = dec
			}
			if r >= 0x80 {
				ascii = false
			}
			b = utf8.AppendRune(b, r)
		default:
			p.pos -= 2
			return "", p.fail(ErrSyntax, "invalid escape \\%c", e)
		}
		if len(b) > p.lim.maxString {
			return "", p.fail(ErrStringTooLong, "string longer than %d bytes", p.lim.maxString)
		}
	}
}

func (p *parser) hex4() (rune, bool) {
	if p.pos+4 > len(p.in) {
		return 0, false
	}
	var r rune
	for _, c := range p.in[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	p.pos += 4
	return r, true
}

// finishString turns a string's bytes into its value. borrowed says raw
// lies in the input: its value then points into the input instead of
// copying it (the parse of a 1 KB call makes some 50 strings), so the
// tree's strings live only as long as the input is left alone, that is,
// during Canonicalize. Nothing that outlives the call may keep one:
// everything a Call holds is built anew, and the name caches clone their
// keys.
func (p *parser) finishString(raw []byte, ascii, borrowed bool) (string, error) {
	if len(raw) > p.lim.maxString {
		return "", p.fail(ErrStringTooLong, "string longer than %d bytes", p.lim.maxString)
	}
	view := func() string {
		if borrowed && len(raw) > 0 {
			return unsafe.String(unsafe.SliceData(raw), len(raw))
		}
		return string(raw)
	}
	if ascii {
		return view(), nil
	}
	if !utf8.Valid(raw) {
		return "", p.fail(ErrInvalidUTF8, "invalid UTF-8 in string")
	}
	if p.raw || norm.NFC.IsNormal(raw) {
		return view(), nil
	}
	s := norm.NFC.String(string(raw))
	if len(s) > p.lim.maxString {
		return "", p.fail(ErrStringTooLong, "string longer than %d bytes", p.lim.maxString)
	}
	return s, nil
}

// formatSegs renders a parse path as the error path: "arguments",
// "arguments.items[2].note", `arguments["a key"]`.
func formatSegs(segs []seg) string {
	b := []byte("arguments")
	for _, s := range segs {
		if s.index >= 0 {
			b = appendIndex(b, s.index)
		} else {
			b = appendKey(b, s.key)
		}
	}
	return string(b)
}

func appendIndex(b []byte, i int) []byte {
	b = append(b, '[')
	b = strconv.AppendInt(b, int64(i), 10)
	return append(b, ']')
}

// appendKey appends ".key" for a plain identifier and `["key"]` otherwise,
// so that a path names exactly one place whatever the keys hold.
func appendKey(b []byte, key string) []byte {
	if isPlainKey(key) {
		if len(b) > 0 {
			b = append(b, '.')
		}
		return append(b, key...)
	}
	b = append(b, '[')
	b = appendJSONString(b, key)
	return append(b, ']')
}

func isPlainKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '$':
		case (c >= '0' && c <= '9') || c == '-':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}
