package canon

import (
	"encoding/binary"
	"strconv"
	"strings"
	"unique"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// Grade is how an identity leaf of one call compares with the same leaf
// of another. Grades are ordered: Different < Restated < Equal, and a
// comparison's Overall grade is the lowest of its leaves'.
type Grade uint8

const (
	// Different: the values name different things, or no reading says
	// they may be one (the zero Grade: what is not known to match does
	// not match).
	Different Grade = iota
	// Restated: probably the same value spelled another way, by a
	// reading that can be wrong ("March 4th" for 2019-03-04 read with the
	// year of the reference date, "San Fran" for "San Francisco"). A
	// caller may ask about it; it must not replay on it.
	Restated
	// Equal: certainly the same value: the same identity digest input
	// (the same JSON, or the same typed normal form).
	Equal
)

func (g Grade) String() string {
	switch g {
	case Equal:
		return "equal"
	case Restated:
		return "restated"
	}
	return "different"
}

// MarshalText encodes the grade by name.
func (g Grade) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// The readings Compare may use, by the names TypedConfig.ReadingsOff
// takes.
const (
	// ReadingYear reads a date without a year ("March 4th") against the
	// reference date: the nearest such date not before it, within a year.
	ReadingYear = "year"
	// ReadingDateOrder reads a numeric date not written year first
	// ("04/27/2022") where only one day/month order is a date.
	ReadingDateOrder = "date-order"
	// ReadingTwelveHour reads a time without am or pm ("7:30") as
	// either half of the day (07:30 or 19:30).
	ReadingTwelveHour = "twelve-hour"
	// ReadingNumberWords reads a number in words ("two") as the number
	// in fields that are not counts (where typed comparison reads them
	// with certainty already).
	ReadingNumberWords = "number-words"
	// ReadingCase compares names (several words) under case, spacing
	// and punctuation between words ("1355 broadway" for "1355
	// Broadway"), and a single word of four letters or more under case
	// ("SOrry"), of three capitalized or not ("tom"). Single tokens
	// shaped like identifiers ("pay_8xK2", "A12b") and shorter words
	// ("Aa", "CO") keep their case.
	ReadingCase = "case"
	// ReadingCurrency reads an amount with a currency sign or word ("$122",
	// "122 bucks", "thirty five dollars") as a bare number of the same
	// field, and a shared sign ("$") as a currency that uses it ("USD"),
	// when no other currency is named in either call.
	ReadingCurrency = "currency"
	// ReadingSubset: one name's words are among the other's, in any order
	// ("Tandoori Mahal" for "Tandoori Mahal Indian Restaurant", "Park Ji
	// Sung" for "Ji Sung Park"). The words left over hold no digit.
	ReadingSubset = "subset"
	// ReadingAbbreviation: a word cut short, three letters or more ("San
	// Fran" for "San Francisco").
	ReadingAbbreviation = "abbreviation"
	// ReadingInitials: a word in capitals that is the initials of a run of
	// the other's words ("SF", "NYC", "KLIA International Airport" for
	// "Kuala Lumpur International Airport").
	ReadingInitials = "initials"
	// ReadingQualifier: a qualifier after a comma ("Seattle, WA" for
	// "Seattle"); two qualifiers must name the same place ("Austin, TX" =
	// "Austin, Texas"; "Paris, France" ≠ "Paris, Texas").
	ReadingQualifier = "qualifier"
	// ReadingRegion: a US state or a country by its code or name ("CA" for
	// "California", "UK" for "United Kingdom"), by the USPS and ISO 3166
	// tables of lookupUSState and lookupCountry.
	ReadingRegion = "region"
)

// readingSet is a set of readings, one bit each.
type readingSet uint16

const (
	readYear readingSet = 1 << iota
	readDateOrder
	readCase
	readCurrency
	readSubset
	readAbbreviation
	readInitials
	readQualifier
	readRegion
	readTwelveHour
	readNumberWordsBit

	allReadings = readYear | readDateOrder | readCase | readCurrency | readSubset | readAbbreviation |
		readInitials | readQualifier | readRegion | readTwelveHour | readNumberWordsBit
)

var readingNames = []string{ReadingYear, ReadingDateOrder, ReadingTwelveHour, ReadingCurrency,
	ReadingNumberWords, ReadingCase, ReadingSubset, ReadingAbbreviation, ReadingInitials,
	ReadingQualifier, ReadingRegion}

// Readings lists the names of the readings TypedConfig.ReadingsOff takes.
func Readings() []string { return append([]string(nil), readingNames...) }

var readingBits = map[string]readingSet{
	ReadingYear: readYear, ReadingDateOrder: readDateOrder, ReadingCase: readCase,
	ReadingCurrency: readCurrency, ReadingSubset: readSubset, ReadingAbbreviation: readAbbreviation,
	ReadingInitials: readInitials, ReadingQualifier: readQualifier, ReadingRegion: readRegion,
	ReadingTwelveHour: readTwelveHour, ReadingNumberWords: readNumberWordsBit,
	"all": allReadings,
}

// Comparison is how two calls' identity leaves compare.
type Comparison struct {
	// Leaves holds one grade for every identity path of either call: the
	// first call's paths in path order, then those only the second has.
	// A path present in one call only is Different.
	Leaves []LeafGrade
	// Overall is the lowest grade of the leaves (Equal when neither call
	// has an identity leaf; Different for calls of different tools).
	Overall Grade
}

// LeafGrade is the grade of one identity path.
type LeafGrade struct {
	Path  string `json:"path"`
	Grade Grade  `json:"grade"`
	// Rule names what decided a grade other than plain equality: a
	// reading (ReadingYear, …) for Restated, "typed" for an Equal leaf
	// whose spellings differ, "missing" for a path one call lacks; ""
	// otherwise. Its values are bounded: it may be logged.
	Rule string `json:"rule,omitempty"`
	// Reading says in words why two spellings were taken for one value:
	// `date "March 4th" = "2019-03-04" (the year of the reference date
	// 2019-03-01)`. It holds argument values: it is for the caller's
	// answer, never for logs.
	Reading string `json:"reading,omitempty"`
}

// IdentityLeaves is a call's identity leaves in the compact form grading reads:
// what the funnel keeps per record to grade candidates without parsing
// the record again (per leaf its path, its JSON, its typed form; per call
// the tool's readings and its reference date). It is immutable and safe
// for concurrent use.
type IdentityLeaves struct {
	// tool and paths are interned, so that a comparison of two calls
	// compares two pointers for each, not their bytes (grading reads
	// hundreds of kept calls a check, scattered over the heap), and the
	// calls of one shape share one copy of their paths. paths is the
	// leaves' paths in order, each after its length as a uvarint: equal
	// exactly when the paths are.
	tool  unique.Handle[string]
	paths unique.Handle[string]
	shape uint64
	// fixed and fixedValues describe the leaves no reading takes for
	// another value (see unreadable): which they are, a bit for each
	// position (no leaf is fixed past the 64th, see digestFixed), and a
	// digest of their values. Two calls of the same paths and rules whose
	// fixed leaves are the same ones with other values are Different, told
	// without reading their leaves.
	fixed, fixedValues uint64
	today              date        // the reference date the call was read against, or zero
	rules              *typedRules // nil: typed comparison off, no readings
	leaves             []idLeaf
	named              []string // currencies the call's identity leaves name: ISO codes, or shared signs
	bytes              int      // the heap it holds (Bytes)
}

type idLeaf struct {
	path, value, typed string
	norm               string // the identity digest input when a Normalize option made it differ from value
	// soft: a text leaf classed by its value (heuristic:prose), kept
	// because the same path may be an identity leaf in another call
	// ("Kuala Lumpur International Airport" and "KLIA" in an unhinted
	// field). It is graded only against an identity leaf, never Equal.
	soft bool
	// code: a command, SQL, a path, a URL or an expression by its class
	// rule, where words and their order carry meaning: no name reading.
	code bool
}

// same reports whether two leaves enter the identity digest alike.
func (l *idLeaf) same(m *idLeaf) bool {
	if l.typed != "" || m.typed != "" {
		return l.typed == m.typed
	}
	return l.digestValue() == m.digestValue()
}

func (l *idLeaf) digestValue() string {
	if l.norm != "" {
		return l.norm
	}
	return l.value
}

// IdentityLeaves returns the call's identity leaves for grading, their
// values copied into one block that keeps nothing else of the Call alive
// (a few hundred bytes for a booking: see BenchmarkIdentityLeaves), their
// paths and tool name interned. Each call allocates a new IdentityLeaves.
func (c *Call) IdentityLeaves() *IdentityLeaves {
	id := &IdentityLeaves{tool: unique.Make(c.Tool), shape: c.ShapeDigest, today: c.today, rules: c.rules}
	n, size, pathSize := 0, 0, 0
	for i := range c.Fields {
		if f := &c.Fields[i]; graded(f) {
			n++
			size += len(f.Value) + len(f.Typed)
			pathSize += uvarintLen(len(f.Path)) + len(f.Path)
		}
	}
	var scratch [256]byte // the paths of most calls fit
	paths := scratch[:0]
	if pathSize > len(scratch) {
		paths = make([]byte, 0, pathSize)
	}
	buf := make([]byte, 0, size)
	for i := range c.Fields {
		if f := &c.Fields[i]; graded(f) {
			paths = append(binary.AppendUvarint(paths, uint64(len(f.Path))), f.Path...)
			buf = append(append(buf, f.Value...), f.Typed...)
		}
	}
	id.paths = unique.Make(string(paths))
	shared, block := id.paths.Value(), string(buf)
	id.leaves = make([]idLeaf, 0, n)
	k, at, pat := 0, 0, 0
	cut := func(n int) string {
		s := block[at : at+n]
		at += n
		return s
	}
	path := func(n int) string {
		pat += uvarintLen(n)
		s := shared[pat : pat+n]
		pat += n
		return s
	}
	for i := range c.Fields {
		f := &c.Fields[i]
		if !graded(f) {
			continue
		}
		l := idLeaf{path: path(len(f.Path)), value: cut(len(f.Value)), typed: cut(len(f.Typed)),
			soft: f.Class == Text, code: codeRules[f.Rule]}
		for k < len(c.norms) && c.norms[k].i < i {
			k++
		}
		if k < len(c.norms) && c.norms[k].i == i {
			l.norm = c.norms[k].s
		}
		id.leaves = append(id.leaves, l)
		if cur := currencyNamed(&l); cur != "" {
			id.named = append(id.named, cur)
		}
		size += len(l.norm)
	}
	id.digestFixed()
	id.bytes = int(unsafe.Sizeof(*id)) + size + cap(id.leaves)*int(unsafe.Sizeof(idLeaf{})) + cap(id.named)*int(unsafe.Sizeof(""))
	return id
}

// digestFixed sets id.fixed and id.fixedValues: over the leaves whose
// differing values unreadable takes as final (with readings off, every
// leaf not text; else those neither a date nor money that are code or
// typed), their positions and what same compares of each. A call of more
// than 64 leaves has none fixed: its candidates are graded.
func (id *IdentityLeaves) digestFixed() {
	if len(id.leaves) > 64 {
		return
	}
	var vals xxhash.Digest
	vals.Reset()
	var n [binary.MaxVarintLen64]byte
	off := id.readingsOff()
	for i := range id.leaves {
		l := &id.leaves[i]
		// As unreadable reads them: a date or money is read whatever its
		// class; then code, or a typed value, is final.
		if l.soft || !off && (l.readFirst() || !l.code && l.typed == "") {
			continue
		}
		id.fixed |= 1 << i
		v := l.typed
		if v == "" {
			v = l.digestValue()
		}
		vals.Write(binary.AppendUvarint(n[:0], uint64(len(v))))
		vals.WriteString(v)
	}
	id.fixedValues = vals.Sum64()
}

// readingsOff: no reading may take one value for another.
func (id *IdentityLeaves) readingsOff() bool { return id.rules == nil || id.rules.readings == 0 }

// readFirst: a date or an amount, which grader.read tries first,
// whatever the leaf's class.
func (l *idLeaf) readFirst() bool {
	k := typedKind(l.typed)
	return k == "date" || k == "money"
}

// fixedDiffer reports, from the digests, that unreadable(b) holds: the
// same leaves of the two calls (of the same paths) are fixed, and their
// values differ.
func (id *IdentityLeaves) fixedDiffer(b *IdentityLeaves) bool {
	return id.rules == b.rules && id.fixed != 0 && id.fixed == b.fixed && id.fixedValues != b.fixedValues
}

// uvarintLen is the length of binary.AppendUvarint's encoding of n.
func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

// Bytes is about how much memory id holds: itself, its leaves and the
// block of their values (the paths and the tool's name are shared by the
// calls of their shape and tool, and a currency named by the leaves is a
// shared string: none of them is counted).
func (id *IdentityLeaves) Bytes() int { return id.bytes }

// codeRules are the class rules of code: values no name reading applies
// to ("rm -rf /tmp/a" is not "rm -rf /tmp/a/b" shortened).
var codeRules = func() map[string]bool {
	m := setOf("heuristic:command", "heuristic:sql", "heuristic:path", "heuristic:expression",
		"heuristic:url", "heuristic:email", "heuristic:uuid")
	for _, n := range []string{"cmd", "command", "script", "sql", "path", "file", "filename", "filepath",
		"dir", "directory", "url", "uri", "href", "link", "sha", "ref", "branch", "host", "hostname",
		"domain", "repo", "repository"} {
		m["heuristic:name="+n] = true
	}
	for _, s := range []string{"_path", "_url", "_uri", "_sha", "_ref"} {
		m["heuristic:name=*"+s] = true
	}
	return m
}()

// graded: an identity leaf, or a text leaf that another call's value may
// make one.
func graded(f *Field) bool {
	return f.Class == Identity || f.Class == Text && f.Rule == "heuristic:prose"
}

// Tool is the call's tool name.
func (id *IdentityLeaves) Tool() string { return id.tool.Value() }

// ShapeDigest is the call's Call.ShapeDigest.
func (id *IdentityLeaves) ShapeDigest() uint64 { return id.shape }

// Len is the number of identity leaves.
func (id *IdentityLeaves) Len() int { return len(id.leaves) }

// Compare grades the identity leaves of a against those of b (calls of
// one tool; see IdentityLeaves.Compare).
func Compare(a, b *Call, ref Date) Comparison {
	return a.IdentityLeaves().Compare(b.IdentityLeaves(), ref)
}

// Compare grades every identity leaf of id against the same path of b.
// A leaf is Equal when it enters both identity digests alike (its JSON,
// or its typed normal form: what IdentityDigest compares), Restated when
// one of the tool's readings (TypedConfig.ReadingsOff) takes the two
// spellings for one value, Different otherwise. Dates without a year are
// read against the call's own reference date (CanonicalizeOn) or, for a
// call read without one, against ref (the check's reference date).
// Overall is Equal exactly when the two IdentityDigests are equal (and
// the tools the same).
func (id *IdentityLeaves) Compare(b *IdentityLeaves, ref Date) Comparison {
	return id.compare(b, ref, false)
}

// Restates reports whether b's identity values are id's restated: Compare
// would find them Restated overall (none Different, not all Equal), and
// then returns that Comparison. It stops at the first Different leaf
// (and then returns no leaves), so it costs little, and allocates
// nothing, against the many calls of one shape that a call does not
// restate.
func (id *IdentityLeaves) Restates(b *IdentityLeaves, ref Date) (Comparison, bool) {
	cmp := id.compare(b, ref, true)
	return cmp, cmp.Overall == Restated
}

// compare is Compare; with stop, it returns at the first Different leaf,
// without the leaves.
func (id *IdentityLeaves) compare(b *IdentityLeaves, ref Date, stop bool) Comparison {
	if id.tool != b.tool {
		return Comparison{Overall: Different}
	}
	same := id.paths == b.paths
	if stop && same && id.fixedDiffer(b) {
		return Comparison{Overall: Different} // unreadable, from the digests
	}
	if stop && same && id.unreadable(b) {
		return Comparison{Overall: Different}
	}
	// The grades go to a buffer on the stack first: most calls graded
	// with stop differ, and then none is kept.
	var small [8]LeafGrade
	g, leaves, overall := grader{a: id, b: b, ref: ref.date()}, small[:0], Equal
	add := func(lg LeafGrade) {
		leaves = append(leaves, lg)
		overall = min(overall, lg.Grade)
	}
	done := func() bool { return stop && overall == Different }
	pair := func(la, lb *idLeaf) {
		switch {
		case la.soft && lb.soft:
			// Text in both: the semantic stage compares it.
		case la.soft || lb.soft:
			add(g.mixed(la, lb))
		default:
			add(g.leaf(la, lb))
		}
	}
	if same {
		for i := range id.leaves {
			if pair(&id.leaves[i], &b.leaves[i]); done() {
				break
			}
		}
	} else {
		id.pairByPath(b, pair, add, done)
	}
	if done() {
		return Comparison{Overall: Different}
	}
	out := Comparison{Overall: overall, Leaves: make([]LeafGrade, len(leaves))}
	copy(out.Leaves, leaves)
	return out
}

// pairByPath pairs the leaves of id and b that share a path, and adds
// those on a path only one of them has as Different, until done.
func (id *IdentityLeaves) pairByPath(b *IdentityLeaves, pair func(la, lb *idLeaf), add func(LeafGrade), done func() bool) {
	inB := make(map[string]int, len(b.leaves))
	for i := range b.leaves {
		inB[b.leaves[i].path] = i
	}
	matched := make([]bool, len(b.leaves))
	for i := range id.leaves {
		la := &id.leaves[i]
		j, ok := inB[la.path]
		switch {
		case ok:
			matched[j] = true
			pair(la, &b.leaves[j])
		case !la.soft:
			add(LeafGrade{Path: la.path, Grade: Different, Rule: "missing", Reading: "only in the first call"})
		}
		if done() {
			return
		}
	}
	for j := range b.leaves {
		if !matched[j] && !b.leaves[j].soft {
			add(LeafGrade{Path: b.leaves[j].path, Grade: Different, Rule: "missing", Reading: "only in the second call"})
		}
	}
}

// unreadable reports whether a leaf of id differs from b's on the same
// path (the paths are the same) in a way no reading can take back: both
// typed, neither a date nor money, or code; or readings off. Then b does
// not restate id, and Restates says so without grading every leaf.
func (id *IdentityLeaves) unreadable(b *IdentityLeaves) bool {
	off := id.readingsOff()
	for i := range id.leaves {
		la, lb := &id.leaves[i], &b.leaves[i]
		if la.soft || lb.soft || la.same(lb) {
			continue
		}
		if off {
			return true
		}
		if la.readFirst() || lb.readFirst() {
			continue // read, dispatches on these first
		}
		if la.typed != "" && lb.typed != "" || la.code || lb.code {
			return true
		}
	}
	return false
}

// grader compares the leaves of two calls.
type grader struct {
	a, b *IdentityLeaves
	ref  date
}

func (g *grader) leaf(la, lb *idLeaf) LeafGrade {
	lg := LeafGrade{Path: la.path}
	if la.same(lb) {
		lg.Grade = Equal
		if la.value != lb.value && la.typed != "" {
			typ, _, _ := strings.Cut(la.typed, " ")
			lg.Rule, lg.Reading = "typed", typ+" "+la.value+" = "+lb.value
		}
		return lg
	}
	r := g.a.rules
	if r == nil || r.readings == 0 {
		return lg
	}
	if rule, why := g.read(r, la, lb); rule != "" {
		lg.Grade, lg.Rule = Restated, rule
		lg.Reading = la.value + " = " + lb.value + " (" + why + ")"
	}
	return lg
}

// mixed grades a path that is an identity leaf in one call and prose in
// the other: only the name readings can take them for one value.
func (g *grader) mixed(la, lb *idLeaf) LeafGrade {
	lg := LeafGrade{Path: la.path}
	r := g.a.rules
	if r == nil || r.readings == 0 || la.code || lb.code {
		return lg
	}
	na, okA := nameText(la)
	nb, okB := nameText(lb)
	if !okA || !okB {
		return lg
	}
	if rule, why := readNames(r, na, nb); rule != "" {
		lg.Grade, lg.Rule = Restated, rule
		lg.Reading = la.value + " = " + lb.value + " (" + why + ")"
	}
	return lg
}

// read tries the readings on two leaves that are not equal. It returns
// the reading that took them for one value and why, or "".
func (g *grader) read(r *typedRules, la, lb *idLeaf) (rule, why string) {
	ka, kb := typedKind(la.typed), typedKind(lb.typed)
	switch {
	case ka == "date" || kb == "date":
		return g.readDates(r, la, lb)
	case ka == "money" || kb == "money":
		return g.readMoney(r, la, lb)
	case ka == "time" && kb == "" || ka == "" && kb == "time":
		return readClock(r, la, lb)
	case ka == "number" && kb == "" || ka == "" && kb == "number":
		return readNumberWords(r, la, lb)
	}
	if la.typed != "" && lb.typed != "" || la.code || lb.code {
		// Two enum members, two aliases: distinct by the schema or
		// the config. Code: its words are not a name's.
		return "", ""
	}
	na, okA := nameText(la)
	nb, okB := nameText(lb)
	if !okA || !okB {
		return "", ""
	}
	return readNames(r, na, nb)
}

// typedKind is the type word of a typed form: "date", "money", …
func typedKind(typed string) string {
	k, _, _ := strings.Cut(typed, " ")
	return k
}

// readDates: a date without a year against a full date (ReadingYear), a
// numeric date in the one order that makes it a date (ReadingDateOrder).
func (g *grader) readDates(r *typedRules, la, lb *idLeaf) (string, string) {
	da, orderA, okA := leafDate(r, la)
	db, orderB, okB := leafDate(r, lb)
	if !okA || !okB {
		return "", ""
	}
	var rule, why string
	if orderA || orderB {
		rule, why = ReadingDateOrder, "the only day and month order that is a date"
	}
	if (da.y == 0) == (db.y == 0) {
		if da != db || rule == "" {
			return "", ""
		}
		return rule, why
	}
	if r.readings&readYear == 0 {
		return "", ""
	}
	short, full, side := da, db, g.a
	if db.y == 0 {
		short, full, side = db, da, g.b
	}
	ref := side.today
	if ref.y == 0 {
		ref = g.ref
	}
	if ref.y == 0 || nextDate(short, ref) != full {
		return "", ""
	}
	yr := "the year of the reference date " + ref.String()
	if why != "" {
		return ReadingYear, why + "; " + yr
	}
	return ReadingYear, yr
}

// leafDate reads a leaf as a date: its typed form, or (ReadingDateOrder)
// a numeric date that only one day/month order reads. order reports the
// latter.
func leafDate(r *typedRules, l *idLeaf) (d date, order, ok bool) {
	if strings.HasPrefix(l.typed, "date ") {
		d, ok = parseDateForm(l.typed[len("date "):])
		return d, false, ok
	}
	if l.typed != "" || r.readings&readDateOrder == 0 || r.dateOrder != 0 {
		return date{}, false, false
	}
	s, ok := leafString(l)
	if !ok || len(s) > 10 || strings.ContainsAny(s, " \t") {
		return date{}, false, false
	}
	m, okM := numericDate(s, 'm')
	dd, okD := numericDate(s, 'd')
	switch {
	case okM && okD && m == dd, okM && !okD:
		return m, true, true
	case okD && !okM:
		return dd, true, true
	}
	return date{}, false, false
}

// parseDateForm reads the date of a typed form: "2019-03-04" or "--03-04".
func parseDateForm(s string) (date, bool) {
	if len(s) == 7 && strings.HasPrefix(s, "--") {
		return date{m: atoi(s[2:4]), d: atoi(s[5:])}, true
	}
	if len(s) < 10 || s[len(s)-3] != '-' || s[len(s)-6] != '-' {
		return date{}, false
	}
	y, err := strconv.Atoi(s[:len(s)-6])
	if err != nil {
		return date{}, false
	}
	return date{y: y, m: atoi(s[len(s)-5 : len(s)-3]), d: atoi(s[len(s)-2:])}, true
}

// nextDate is the first date with d's month and day on or after ref,
// within a year; the zero date when there is none (February 29th in a
// year without one).
func nextDate(d, ref date) date {
	y := ref.y
	if d.m < ref.m || d.m == ref.m && d.d < ref.d {
		y++
	}
	n := date{y: y, m: d.m, d: d.d}
	if !validYearDate(n) {
		return date{}
	}
	return n
}

func validYearDate(d date) bool {
	if d.m == 2 && d.d == 29 {
		return d.y%4 == 0 && (d.y%100 != 0 || d.y%400 == 0)
	}
	return validDate(d)
}

// readClock: a time on a 12-hour clock without am/pm ("7:30") against a
// time it names in either half of the day (07:30, 19:30:
// ReadingTwelveHour).
func readClock(r *typedRules, la, lb *idLeaf) (string, string) {
	if r.readings&readTwelveHour == 0 {
		return "", ""
	}
	t, s, ok := typedAndBare(la, lb, "time ")
	if !ok || strings.HasSuffix(t, "Z") {
		return "", ""
	}
	s = strings.TrimSpace(s)
	if !strings.ContainsRune(s, ':') {
		return "", ""
	}
	c, _, ok := parseClock(s)
	if !ok || c.hasZone || c.h < 1 || c.h > 12 {
		return "", ""
	}
	for _, h := range [2]int{c.h % 12, c.h%12 + 12} {
		c.h = h
		if r.clockString(c) == t {
			return ReadingTwelveHour, "a 12-hour time without am or pm"
		}
	}
	return "", ""
}

// typedAndBare splits a pair of leaves into the one typed with the kind
// prefix (its form, the prefix cut) and the untyped string (unquoted).
func typedAndBare(la, lb *idLeaf, prefix string) (form, bare string, ok bool) {
	typed, other := la, lb
	if la.typed == "" {
		typed, other = lb, la
	}
	form, ok = strings.CutPrefix(typed.typed, prefix)
	if !ok {
		return "", "", false
	}
	bare, ok = leafString(other)
	return form, bare, ok
}

// readNumberWords: a number in words outside a count field ("two") against
// the number (ReadingNumberWords).
func readNumberWords(r *typedRules, la, lb *idLeaf) (string, string) {
	if r.readings&readNumberWordsBit == 0 {
		return "", ""
	}
	n, s, ok := typedAndBare(la, lb, "number ")
	if !ok {
		return "", ""
	}
	if w, ok := parseNumberWords(s); ok && w == n {
		return ReadingNumberWords, "a number in words"
	}
	return "", ""
}

// readMoney: an amount with a currency against a bare number, or a shared
// sign against a currency that uses it (ReadingCurrency), when no other
// currency is named in either call.
func (g *grader) readMoney(r *typedRules, la, lb *idLeaf) (string, string) {
	if r.readings&readCurrency == 0 {
		return "", ""
	}
	curA, amtA, moneyA := moneyOf(la.typed)
	curB, amtB, moneyB := moneyOf(lb.typed)
	if !moneyA {
		amtA, moneyA = strings.CutPrefix(la.typed, "number ")
		curA = ""
		if !moneyA {
			return "", ""
		}
	}
	if !moneyB {
		amtB, moneyB = strings.CutPrefix(lb.typed, "number ")
		curB = ""
		if !moneyB {
			return "", ""
		}
	}
	if amtA != amtB {
		return "", ""
	}
	if curA != "" && curB != "" && !sameCurrency(curA, curB) {
		return "", ""
	}
	for _, named := range [2][]string{g.a.named, g.b.named} {
		for _, n := range named {
			if !sameCurrency(n, curA) || !sameCurrency(n, curB) {
				return "", ""
			}
		}
	}
	if curA != "" && curB != "" {
		return ReadingCurrency, "the sign can be the currency named"
	}
	return ReadingCurrency, "a bare amount, and no other currency named"
}

// moneyOf splits "money USD 1250" into its currency and amount.
func moneyOf(typed string) (cur, amount string, ok bool) {
	rest, ok := strings.CutPrefix(typed, "money ")
	if !ok {
		return "", "", false
	}
	cur, amount, ok = strings.Cut(rest, " ")
	return cur, amount, ok
}

// sameCurrency: two currency markers (ISO codes or shared signs) may be
// one currency; "" (a bare amount) is any currency.
func sameCurrency(x, y string) bool {
	if x == "" || y == "" || x == y {
		return true
	}
	u := symbolTables().users
	return u[x][y] || u[y][x]
}

// currencyNamed is the currency an identity leaf names, or "": the
// currency of an amount, a currency field, or a value that is an ISO 4217
// code written in capitals ("EUR").
func currencyNamed(l *idLeaf) string {
	if cur, _, ok := moneyOf(l.typed); ok {
		return cur
	}
	if c, ok := strings.CutPrefix(l.typed, "currency "); ok {
		return c
	}
	if m, ok := strings.CutPrefix(l.typed, "enum "); ok {
		if c, ok := isoCurrency(m); ok && c == m {
			return c
		}
	}
	if l.typed == "" && len(l.value) == 5 && l.value[0] == '"' {
		code := l.value[1:4]
		if c, ok := isoCurrency(code); ok && c == code {
			return c
		}
	}
	return ""
}

// leafString is a leaf's string value, unquoted; false for other JSON.
func leafString(l *idLeaf) (string, bool) {
	v := l.value
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if strings.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1], true
	}
	s, err := strconv.Unquote(v)
	return s, err == nil
}

// nameText is the text the name readings compare: an untyped string, or
// the name an alias or enum member stands for.
func nameText(l *idLeaf) (string, bool) {
	switch typedKind(l.typed) {
	case "":
		return leafString(l)
	case "alias", "enum":
		_, name, _ := strings.Cut(l.typed, " ")
		return name, true
	}
	return "", false
}
