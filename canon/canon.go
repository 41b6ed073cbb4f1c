// Package canon encodes a tool call deterministically: equal calls, equal
// bytes.
//
// Canonicalize reads a tool name and its arguments (a JSON object, or a JSON
// string holding one, as OpenAI's tool_calls[].function.arguments is) and
// returns a Call: the canonical JSON bytes (object keys sorted by code point,
// no insignificant white space, no HTML escaping, strings in Unicode NFC,
// every number in one exact spelling), an xxhash64 of them, the class of
// every leaf (identity, text or ignored) with the rule that decided it, a
// digest of the identity leaves, and the text view that gets embedded.
//
// The parser is written here rather than taken from encoding/json because
// canonical form needs what that package does not give: numbers kept as
// exact decimal digits (never through float64), duplicate keys rejected
// (encoding/json keeps the last silently), invalid UTF-8 and lone
// surrogates rejected (encoding/json replaces them with U+FFFD), and errors
// that name the path. It is also faster than decoding into interface
// values and re-encoding (see BenchmarkCanonicalize).
//
// Classes are decided, in order, by the tool's config (path patterns), the
// tool's JSON Schema (x-idem-class, enum/const, format, scalar type), then
// the value heuristics documented on heuristic.
//
// Identity leaves enter the identity digest by their typed meaning where it
// is certain ("evening 7:30" and "19:30" are the time 19:30): see
// TypedConfig for the types, the rules for partial values and what is
// deliberately left a string. The canonical bytes and the hash stay exact.
//
// Compare grades two calls' identity leaves: equal (what the identity
// digest compares), restated (probably the same value, by a named
// reading: a date without a year read against the reference date, a name
// shortened or in another case, an amount with a sign against a bare
// number) or different. The readings are written here, not taken from a
// fuzzy-matching library, because each must say which rule took two
// spellings for one value and refuse the near misses that name another
// thing (one hour apart, another day, "Santa Rosa" and "Santa Clara"),
// where similarity scores rank both alike.
package canon

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/text/cases"
)

// Field is one leaf of the arguments: a scalar or an empty object or array.
type Field struct {
	// Path names the leaf: "user_id", "flights[0].date", `headers["X-Id"]`.
	Path string `json:"path"`
	// Class is how the leaf takes part in duplicate detection.
	Class Class `json:"class"`
	// Rule is what decided the class: "config:items[].note",
	// "schema:enum", "heuristic:email", …
	Rule string `json:"rule"`
	// Value is the leaf's canonical JSON ("\"JFK\"", "12.5", "true", "[]").
	Value string `json:"value"`
	// Typed is the typed normal form that stood for an identity leaf in
	// the identity digest ("time 19:30", "date --03-14", "money USD 1250",
	// "alias new york"), or "" when the value was compared as its JSON.
	Typed string `json:"typed,omitempty"`
}

// HashHex writes a hash or digest of a Call as the API shows it: 16
// lowercase hex digits, zero-padded (what fmt's %016x writes, without its
// boxing: every answer carries two).
func HashHex(h uint64) string {
	const digits = "0123456789abcdef"
	var b [16]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = digits[h&0xf]
		h >>= 4
	}
	return string(b[:])
}

// Call is a canonicalized tool call. It is immutable once returned and safe
// to share between goroutines.
type Call struct {
	Tool string
	// Canonical is the arguments' canonical JSON.
	Canonical []byte
	// Hash is xxhash64 over the tool name, a NUL byte and the canonical
	// JSON without the ignored fields (with none ignored, exactly the
	// canonical bytes).
	Hash uint64
	// IdentityDigest is xxhash64 over the tool name and every identity
	// leaf (path and normalized value, in path order): the typed normal
	// form where the leaf has one (Field.Typed), its JSON otherwise.
	IdentityDigest uint64
	// TypedDigest is IdentityDigest with every identity string that did
	// not parse as a typed value (Field.Typed empty) entered by its path
	// alone. Two calls with equal TypedDigest and different IdentityDigest
	// differ only in such strings ("SF" and "San Francisco"): a judge may
	// decide them, the identity gate cannot.
	TypedDigest uint64
	// ShapeDigest is xxhash64 over the tool name and the paths of the
	// identity leaves whose class does not depend on their value (decided
	// by config, schema or field name), in path order, values left out.
	// Two calls can grade equal or restated (see Compare) only if their
	// ShapeDigests are equal: it is the key to find a call's gradable
	// candidates by hash. (A leaf classed by its value, "SF" identity and
	// "Kuala Lumpur International Airport" prose in an unhinted field,
	// may be either class in another call, so its path stays out.)
	ShapeDigest uint64
	// Fields lists every leaf in path order (the order of the canonical
	// bytes).
	Fields []Field

	// Relative reports that an identity value was a relative date
	// ("tomorrow") read against the reference date (CanonicalizeOn): the
	// same canonical bytes said on another day are another call.
	Relative bool

	textView      string
	textTruncated bool
	hasText       bool

	// What Identity needs to grade the call against another.
	rules *typedRules // the tool's typed rules, nil when typed comparison is off
	today date        // the reference date the call was read against
	norms []normAt    // identity leaves whose digest input is not their JSON
}

// normAt is the identity digest input of Fields[i] where a Normalize
// option made it differ from the leaf's JSON.
type normAt struct {
	i int
	s string
}

// TextView returns the text that gets embedded: the tool name on the first
// line, then one "path: value" line for each text field in path order,
// with white space inside a value folded to single spaces, bounded by
// Config.MaxTextView.
func (c *Call) TextView() string { return c.textView }

// TextTruncated reports whether the text view was cut at MaxTextView.
func (c *Call) TextTruncated() bool { return c.textTruncated }

// HasText reports whether any field is classed text: without one, the call
// has nothing for a semantic comparison to look at.
func (c *Call) HasText() bool { return c.hasText }

// Canonicalizer turns tool calls into Calls under one Config. It is safe for
// concurrent use.
type Canonicalizer struct {
	cfg   Config
	tools map[string]*toolRules
	deflt *toolRules // for tools without a config
}

type toolRules struct {
	schema *schema
	fields map[string]FieldRule // aliases folded
	norm   Normalize
	typed  *typedRules // nil: typed comparison off
}

// New checks cfg and compiles the tools' schemas.
func New(cfg Config) (*Canonicalizer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Canonicalizer{cfg: cfg, tools: make(map[string]*toolRules, len(cfg.Tools)),
		deflt: &toolRules{typed: compileTyped(cfg.Typed)}}
	for name, t := range cfg.Tools {
		s, err := compileSchema(t.Schema)
		if err != nil {
			return nil, fmt.Errorf("canon config: tools[%q]: %w", name, err)
		}
		typed := cfg.Typed
		if t.Typed != nil {
			typed = *t.Typed
		}
		c.tools[name] = &toolRules{schema: s, fields: foldFieldAliases(t.Fields), norm: t.Normalize,
			typed: compileTyped(typed)}
	}
	return c, nil
}

// Config returns the configuration the Canonicalizer was built with.
func (c *Canonicalizer) Config() Config { return c.cfg }

const maxToolName = 256

func validToolName(tool string) error {
	switch {
	case tool == "":
		return fmt.Errorf("empty")
	case len(tool) > maxToolName:
		return fmt.Errorf("longer than %d bytes", maxToolName)
	case !utf8.ValidString(tool):
		return fmt.Errorf("invalid UTF-8")
	}
	for _, r := range tool {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("control character %U", r)
		}
	}
	return nil
}

// Canonicalize parses and canonicalizes one call. Every error is an *Error
// naming the path and the problem; nothing panics on any input. Relative
// dates in the call stay strings: see CanonicalizeOn.
func (c *Canonicalizer) Canonicalize(tool string, args []byte) (*Call, error) {
	return c.CanonicalizeOn(tool, args, Date{})
}

// CanonicalizeOn is Canonicalize for a call made on the date today (the
// caller's local date; see Canonicalizer.Today): relative dates in its
// identity fields ("tomorrow", "Tuesday next week") are read as the dates
// they name on that day, where that is certain (see relativeDate). A zero
// today reads none.
func (c *Canonicalizer) CanonicalizeOn(tool string, args []byte, today Date) (*Call, error) {
	if err := validToolName(tool); err != nil {
		return nil, &Error{Path: "tool", Offset: -1, Err: ErrBadTool, Detail: err.Error()}
	}
	root, leaves, err := c.parse(args)
	if err != nil {
		return nil, err
	}
	rules := c.tools[tool]
	if rules == nil {
		rules = c.deflt
	}
	// The walker's scratch buffers come from a pool: only the canonical
	// bytes and the fields are handed out with the Call; paths, values
	// and the text view are copied into strings.
	sc := scratchBufs.Get().(*scratch)
	defer scratchBufs.Put(sc)
	w := walker{rules: rules, maxText: c.cfg.MaxTextView, today: today.date()}
	w.shape.Reset()
	w.shape.WriteString(tool)
	w.shape.WriteString("\x00")
	w.c = make([]byte, 0, len(args)+16)
	w.fields = make([]Field, 0, leaves)
	w.spans, w.paths, w.ids, w.tids = sc.spans[:0], sc.paths[:0], sc.ids[:0], sc.tids[:0]
	w.path, w.pat, w.text, w.h = sc.path[:0], sc.pat[:0], sc.text[:0], sc.h[:0]
	w.text = append(w.text, tool...)
	w.value(&root, "", rules.schema, decided{norm: rules.norm}, false)
	w.finishFields()
	defer func() {
		*sc = scratch{spans: w.spans, paths: w.paths, ids: w.ids, tids: w.tids, path: w.path, pat: w.pat, text: w.text, h: w.h}
	}()

	call := &Call{
		Tool:          tool,
		Canonical:     w.c,
		Fields:        w.fields,
		textView:      string(w.text),
		textTruncated: w.textCut,
		hasText:       w.hasText,
		Relative:      w.relative,
		ShapeDigest:   w.shape.Sum64(),
		rules:         rules.typed,
		today:         today.date(),
		norms:         w.norms,
	}
	hashed := w.c
	if w.hOn {
		hashed = w.h
	}
	call.Hash = sum(tool, hashed)
	call.IdentityDigest = sum(tool, w.ids)
	call.TypedDigest = sum(tool, w.tids)
	return call, nil
}

// scratch holds a walker's temporary buffers between calls.
type scratch struct {
	spans                                []span
	paths, ids, tids, path, pat, text, h []byte
}

var scratchBufs = sync.Pool{New: func() any { return new(scratch) }}

func sum(tool string, b []byte) uint64 {
	var d xxhash.Digest
	d.Reset()
	d.WriteString(tool)
	d.Write([]byte{0})
	d.Write(b)
	return d.Sum64()
}

// parse reads the arguments: an object, or a string holding one (an empty
// or blank string counts as an empty object, as OpenAI sends for tools
// without parameters).
func (c *Canonicalizer) parse(args []byte) (node, int, error) {
	lim := limits{maxDepth: c.cfg.MaxDepth, maxLeaves: c.cfg.MaxLeaves, maxString: c.cfg.MaxStringBytes}
	if len(args) > c.cfg.MaxBytes {
		return node{}, 0, &Error{Path: "arguments", Offset: -1, Err: ErrTooLarge,
			Detail: fmt.Sprintf("%d bytes, more than the limit of %d", len(args), c.cfg.MaxBytes)}
	}
	p := parser{in: args, lim: lim}
	p.skipWS()
	if p.pos == len(args) {
		return node{}, 0, &Error{Path: "arguments", Offset: 0, Err: ErrSyntax, Detail: "empty, want a JSON object"}
	}
	if args[p.pos] == '"' {
		// The JSON text inside the string is read raw: NFC applies to the
		// strings inside it, not to its syntax.
		wrap := parser{in: args, lim: limits{maxDepth: 1, maxLeaves: 1, maxString: c.cfg.MaxBytes}, raw: true}
		s, err := wrap.parseDocument()
		if err != nil {
			return node{}, 0, err
		}
		inner := []byte(s.s)
		if strings.TrimSpace(s.s) == "" {
			inner = []byte("{}")
		}
		return c.parseObject(inner, lim, " (inside the arguments string)")
	}
	return c.parseObject(args, lim, "")
}

// scratchPool recycles the parser's work stack and unescape buffer.
var scratchPool = sync.Pool{New: func() any { return new(parser) }}

func (c *Canonicalizer) parseObject(in []byte, lim limits, where string) (node, int, error) {
	p := scratchPool.Get().(*parser)
	*p = parser{in: in, lim: lim, stack: p.stack[:0], buf: p.buf[:0]}
	defer func() {
		p.in = nil
		scratchPool.Put(p)
	}()
	n, err := p.parseDocument()
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Detail += where
		}
		return node{}, 0, err
	}
	if n.kind != kObject {
		return node{}, 0, &Error{Path: "arguments", Offset: 0, Err: ErrNotObject,
			Detail: "want a JSON object (or a string holding one), got " + kindName(n.kind) + where}
	}
	return n, p.leaves, nil
}

func kindName(k kind) string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

// decided is what an enclosing rule has already settled for a subtree.
type decided struct {
	class   Class
	rule    string
	norm    Normalize
	typ     string            // FieldRule.Type
	aliases map[string]string // FieldRule.Aliases, folded
}

// walker encodes the canonical bytes and, in the same pass, classes every
// leaf and builds the identity digest input and the text view.
type walker struct {
	rules    *toolRules
	today    date   // the call's reference date (CanonicalizeOn), or zero
	relative bool   // a relative date was read against today
	c        []byte // canonical bytes
	h        []byte // canonical bytes without ignored fields, once hOn
	hOn      bool
	path     []byte // path of the current node
	pat      []byte // path pattern of the current node
	fields   []Field
	spans    []span // where each field's path and value are in paths and c
	paths    []byte // every field's path, end to end
	ids      []byte // identity digest input
	tids     []byte // typed digest input
	text     []byte
	shape    xxhash.Digest // ShapeDigest input: the identity paths
	norms    []normAt
	maxText  int
	textCut  bool
	hasText  bool
}

// enter applies the config rule for the current pattern and the schema's
// own class annotation, in that order of precedence.
func (w *walker) enter(d decided, s *schema, name string, container bool) decided {
	if len(w.rules.fields) > 0 {
		if r, ok := w.rules.fields[string(w.pat)]; ok {
			if r.Class != 0 {
				d.class, d.rule = r.Class, "config:"+string(w.pat)
			}
			d.norm = d.norm.or(r.Normalize)
			if r.Type != "" {
				d.typ = r.Type
			}
			if r.Aliases != nil {
				d.aliases = r.Aliases
			}
		}
	}
	if container && d.class == 0 {
		if s != nil && s.class != 0 {
			d.class, d.rule = s.class, "schema:x-idem-class"
		} else if s == nil && nameRulesOf(name).volatile {
			d.class, d.rule = Ignored, "heuristic:volatile-name"
		}
	}
	return d
}

func isContainer(n *node) bool {
	return (n.kind == kObject || n.kind == kArray) && len(n.kids) > 0
}

// classOf decides a leaf's class.
func classOf(n *node, name string, s *schema, d decided) (Class, string) {
	if d.class != 0 {
		return d.class, d.rule
	}
	if c, r, ok := s.decide(); ok {
		return c, r
	}
	return heuristic(name, n)
}

// value encodes n. skipH is true inside an ignored subtree.
func (w *walker) value(n *node, name string, s *schema, d decided, skipH bool) {
	switch {
	case n.kind == kObject && len(n.kids) > 0:
		w.c = append(w.c, '{')
		if w.hOn && !skipH {
			w.h = append(w.h, '{')
		}
		cN, hN := 0, 0
		pathLen, patLen := len(w.path), len(w.pat)
		for i := range n.kids {
			m := &n.kids[i]
			w.path = appendKey(w.path, m.key)
			w.pat = appendKey(w.pat, m.key)
			sub := s.property(m.key)
			cont := isContainer(m)
			md := w.enter(d, sub, m.key, cont)
			ignored := skipH || md.class == Ignored
			var cls Class
			var rule string
			if !cont {
				cls, rule = classOf(m, m.key, sub, md)
				ignored = skipH || cls == Ignored
			}
			if ignored && !w.hOn && !skipH {
				w.hOn = true
				w.h = append(w.h[:0], w.c...)
			}
			if cN > 0 {
				w.c = append(w.c, ',')
			}
			cN++
			w.c = appendJSONString(w.c, m.key)
			w.c = append(w.c, ':')
			if !ignored {
				if w.hOn {
					if hN > 0 {
						w.h = append(w.h, ',')
					}
					w.h = appendJSONString(w.h, m.key)
					w.h = append(w.h, ':')
				}
				hN++
			}
			if cont {
				w.value(m, m.key, sub, md, ignored)
			} else {
				w.leaf(m, m.key, sub, md, cls, rule, ignored)
			}
			w.path, w.pat = w.path[:pathLen], w.pat[:patLen]
		}
		w.c = append(w.c, '}')
		if w.hOn && !skipH {
			w.h = append(w.h, '}')
		}
	case n.kind == kArray && len(n.kids) > 0:
		w.c = append(w.c, '[')
		if w.hOn && !skipH {
			w.h = append(w.h, '[')
		}
		pathLen, patLen := len(w.path), len(w.pat)
		w.pat = append(w.pat, "[]"...)
		for i := range n.kids {
			e := &n.kids[i]
			w.path = appendIndex(w.path, i)
			sub := s.element(i)
			cont := isContainer(e)
			ed := w.enter(d, sub, name, cont)
			ignored := skipH || ed.class == Ignored
			var cls Class
			var rule string
			if !cont {
				cls, rule = classOf(e, name, sub, ed)
				ignored = skipH || cls == Ignored
			}
			if ignored && !w.hOn && !skipH {
				w.hOn = true
				w.h = append(w.h[:0], w.c...)
			}
			if i > 0 {
				w.c = append(w.c, ',')
				if w.hOn && !skipH {
					w.h = append(w.h, ',')
				}
			}
			if ignored && w.hOn && !skipH {
				// An ignored element keeps its place so indices stay put.
				w.h = append(w.h, "null"...)
			}
			if cont {
				w.value(e, name, sub, ed, ignored)
			} else {
				w.leaf(e, name, sub, ed, cls, rule, ignored)
			}
			w.path = w.path[:pathLen]
		}
		w.pat = w.pat[:patLen]
		w.c = append(w.c, ']')
		if w.hOn && !skipH {
			w.h = append(w.h, ']')
		}
	default:
		// Only the arguments object itself reaches here as a leaf: {}.
		w.c = appendLeaf(w.c, n)
		if w.hOn && !skipH {
			w.h = appendLeaf(w.h, n)
		}
	}
}

// leaf encodes one leaf and records its field, identity and text parts.
// Field paths and values are kept as offsets and turned into strings once
// the walk is over (two allocations for the whole call, not two per leaf).
func (w *walker) leaf(n *node, name string, s *schema, d decided, cls Class, rule string, ignored bool) {
	start := len(w.c)
	w.c = appendLeaf(w.c, n)
	if w.hOn && !ignored {
		w.h = append(w.h, w.c[start:]...)
	}
	pStart := len(w.paths)
	w.paths = append(w.paths, w.path...)
	w.spans = append(w.spans, span{pStart, len(w.paths), start, len(w.c)})
	w.fields = append(w.fields, Field{Class: cls, Rule: rule})
	switch cls {
	case Identity:
		if stableClass(rule, name) {
			w.shape.Write(w.path)
			w.shape.WriteString("\n")
		}
		w.ids = append(w.ids, w.path...)
		w.ids = append(w.ids, '=')
		w.tids = append(w.tids, w.path...)
		w.tids = append(w.tids, '=')
		typed := ""
		if w.rules.typed != nil {
			typed = w.rules.typed.typedForm(n, s, leafInfo{name: name, typ: d.typ, aliases: d.aliases, today: w.today}, &w.relative)
		}
		switch {
		case typed != "":
			// '@' starts no JSON value: a typed form never equals a
			// value compared as its JSON.
			w.fields[len(w.fields)-1].Typed = typed
			w.ids = append(w.ids, '@')
			w.ids = append(w.ids, typed...)
			w.tids = append(w.tids, '@')
			w.tids = append(w.tids, typed...)
		case n.kind == kString:
			at := len(w.ids)
			w.ids = appendIdentity(w.ids, n, s, d.norm)
			if string(w.ids[at:]) != string(w.c[start:]) {
				w.norms = append(w.norms, normAt{len(w.fields) - 1, string(w.ids[at:])})
			}
			w.tids = append(w.tids, '?')
		default:
			w.ids = appendIdentity(w.ids, n, s, d.norm)
			w.tids = appendLeaf(w.tids, n)
		}
		w.ids = append(w.ids, '\n')
		w.tids = append(w.tids, '\n')
	case Text:
		w.hasText = true
		w.appendText(w.path, n)
	}
}

type span struct{ p0, p1, v0, v1 int }

// stableClass: an identity leaf that is one whatever its value: classed
// by config or schema, or named like an identifier (its value's shape may
// decide first, "heuristic:date", but always for identity). Without such
// a name the value decides: "SF" is identity, a sentence text.
func stableClass(rule, name string) bool {
	return !strings.HasPrefix(rule, "heuristic:") || nameRulesOf(name).identity != ""
}

// finishFields fills in the paths and values of the fields.
func (w *walker) finishFields() {
	paths, values := string(w.paths), string(w.c)
	for i, s := range w.spans {
		w.fields[i].Path = paths[s.p0:s.p1]
		w.fields[i].Value = values[s.v0:s.v1]
	}
}

// appendText adds one "path: value" line to the text view, within bounds.
func (w *walker) appendText(path []byte, n *node) {
	if w.textCut {
		return
	}
	v := n.s
	if n.kind != kString {
		v = string(appendLeaf(nil, n))
	}
	line := make([]byte, 0, len(path)+len(v)+3)
	line = append(line, '\n')
	line = append(line, path...)
	line = append(line, ": "...)
	line = appendFolded(line, v)
	if len(w.text)+len(line) > w.maxText {
		room := w.maxText - len(w.text)
		for room > 0 && !utf8.RuneStart(line[room]) {
			room--
		}
		line = line[:max(room, 0)]
		w.textCut = true
	}
	w.text = append(w.text, line...)
}

// appendFolded appends s with every run of white space folded to one space
// and no space at either end.
func appendFolded(b []byte, s string) []byte {
	first := true
	for _, f := range strings.Fields(s) {
		if !first {
			b = append(b, ' ')
		}
		b = append(b, f...)
		first = false
	}
	return b
}

var folder = cases.Fold()

// appendIdentity appends the normalized form of an identity leaf.
func appendIdentity(b []byte, n *node, s *schema, norm Normalize) []byte {
	if n.kind != kString {
		return appendLeaf(b, n)
	}
	v := n.s
	if norm.NumberStrings && s.numeric() {
		if num, ok := numberString(v); ok {
			return append(b, num...)
		}
	}
	if norm.Trim {
		v = string(appendFolded(nil, v))
	}
	if norm.FoldCase {
		v = folder.String(v)
	}
	return appendJSONString(b, v)
}

func appendLeaf(b []byte, n *node) []byte {
	switch n.kind {
	case kNull:
		return append(b, "null"...)
	case kString:
		return appendJSONString(b, n.s)
	case kArray:
		return append(b, "[]"...)
	case kObject:
		return append(b, "{}"...)
	default:
		return append(b, n.s...)
	}
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string the way RFC 8785 does: only
// '"', '\\' and control characters are escaped (the short forms where JSON
// has them, \u00xx otherwise); everything else, '<', '>' and '&' included,
// is written as is. s must be valid UTF-8.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
