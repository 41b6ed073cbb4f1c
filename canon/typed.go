package canon

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// TypedConfig says how a tool's identity values are compared by meaning.
// The zero value switches typed comparison on with the strict rules.
//
// An identity leaf is compared by its meaning where its meaning is certain:
// "evening 7:30" and "19:30" are the time 19:30, "$1,250.00" and "1250 USD"
// are 1250 US dollars, "two" and 2 are the number 2. The typed normal form
// ("time 19:30", "money USD 1250", "number 2") replaces the leaf's JSON in
// the identity digest; the canonical bytes and the hash stay exact, and
// Field.Typed reports the form so a decision can say which rule matched.
//
// A value is read as a type, in this order, by: a configured alias table
// (FieldRule.Aliases, TypedConfig.Aliases); the field's configured type
// (FieldRule.Type, which is also how the built-in tables of ISO 3166
// countries, ISO 4217 currencies and US states are switched on); the tool's
// JSON Schema (type number/integer/boolean, format date, date-time, time,
// email, uri, enum members); then the value's own shape. Whatever is not
// read with certainty stays a string, compared as before: a wrong equality
// (a booking for 19:30 replayed for 20:30) is worse than a missed one.
//
// What is deliberately not read (each stays a string):
//   - relative dates ("today", "tomorrow", "next Monday", "4th of this
//     month") without a reference date: their value depends on the day
//     they were said on. CanonicalizeOn reads them against one (see
//     relativeDate for which and how); "the 11th" or "Friday" alone are
//     never read;
//   - numeric dates other than year first (03/01/2019) unless
//     TypedConfig.DateOrder says which order the tool's users write;
//   - 12-hour times without am/pm or a day period ("7:30", "half past 6"),
//     and day periods that do not fix the half of the day ("12 in the
//     morning", "3 in the night");
//   - a dollar, yen, pound or krone sign, or "dollars"/"bucks", without a
//     configured currency that uses it: "$5" equals "5 dollars" (the same
//     unknown dollar) but not "USD 5";
//   - number words outside number fields (see quantityNorm): a name such
//     as "Seven" is not the number 7;
//   - phone numbers without a leading "+" unless a NANP region is
//     configured (other national formats need per-country rules: see
//     TypedConfig.PhoneRegion).
//
// Partial values compare by explicit, per-tool rules (TypedConfig.Year,
// TypedConfig.Zone): by default a date without a year equals only another
// date without a year and the same month and day, and a time without a
// zone only another time without a zone.
//
// The parsers are written here rather than taken from a date or money
// library because they must refuse every reading that is not certain, and
// the general-purpose parsers on the module proxy guess (day/month order,
// the half of the day, the century, the currency of "$"). The tables come
// from golang.org/x/text (ISO 3166 regions and their English names, ISO
// 4217 currencies and their symbols); US state codes have no maintained
// Go table, so they are written out here from USPS Publication 28.
type TypedConfig struct {
	// Off switches typed comparison off: identity values enter the digest
	// as their canonical JSON (after Normalize), as before typed values.
	Off bool `json:"off,omitempty" yaml:"off,omitempty"`
	// DateOrder reads numeric dates that are not year first: "mdy"
	// (03/01/2019 is March 1st) or "dmy" (1 March). Empty leaves them
	// strings: the order is never guessed.
	DateOrder string `json:"date_order,omitempty" yaml:"date_order,omitempty"`
	// Year is how a date without a year ("March 14th") compares:
	// "distinct" (the default) equals it only to a date written without a
	// year; "ignore" compares every date of the tool by month and day
	// alone, so "March 14th" = 2019-03-14, and 2019-03-14 = 2020-03-14.
	// Use "ignore" for tools whose dates are always within the coming
	// months (bookings, appointments).
	Year string `json:"year,omitempty" yaml:"year,omitempty"`
	// Zone is how a time or date-time without a zone compares: "distinct"
	// (the default) equals it only to one without a zone; "ignore"
	// compares every time of the tool by its wall clock, zone dropped.
	// Times with zones are otherwise compared as instants (19:30+01:00 =
	// 18:30Z).
	Zone string `json:"zone,omitempty" yaml:"zone,omitempty"`
	// Currency is the tool's ISO 4217 currency: the one a sign it shares
	// with other currencies means ("$" for USD, CAD, AUD…), and "dollars"
	// or "bucks" where it is a dollar; and the one a bare amount in a money
	// field (see moneyName) is in. Empty: such amounts stay partial.
	Currency string `json:"currency,omitempty" yaml:"currency,omitempty"`
	// PhoneRegion reads national phone numbers in phone fields as E.164:
	// "US" or "CA" (NANP: (415) 555-0100 is +14155550100). Empty: only
	// numbers written with "+" are read.
	PhoneRegion string `json:"phone_region,omitempty" yaml:"phone_region,omitempty"`
	// DecimalComma reads "1.250,50" as 1250.5; by default "1,250.50" is.
	DecimalComma bool `json:"decimal_comma,omitempty" yaml:"decimal_comma,omitempty"`
	// Timezone is the IANA zone ("America/New_York") of the tool's
	// callers. With it, a call that carries no reference date of its own
	// is read against the day it is checked on in this zone, so its
	// relative dates ("today", "next Monday": see relativeDate) are read
	// as dates. Empty (the default): only calls that carry a reference
	// date have their relative dates read; the rest stay strings.
	Timezone string `json:"timezone,omitempty" yaml:"timezone,omitempty"`
	// Aliases maps an alias to what it names ("NY": "New York"), for every
	// identity string of the tool; matched under case folding and white
	// space folding. FieldRule.Aliases adds tables for one field.
	Aliases map[string]string `json:"aliases,omitempty" yaml:"aliases,omitempty"`
	// ReadingsOff names the probable readings (see Compare and the
	// Reading constants) this tool's identity values are not read by:
	// year, date-order, twelve-hour, currency, number-words, case,
	// subset, abbreviation, initials, qualifier, region, or all. Empty
	// (the default): every reading is on. Readings only ever grade a
	// leaf Restated, never Equal: they do not change the identity
	// digest.
	ReadingsOff []string `json:"readings_off,omitempty" yaml:"readings_off,omitempty"`
}

// Types a field can be given with FieldRule.Type.
const (
	TypeString   = "string" // never typed: compared as its JSON
	TypeDate     = "date"
	TypeTime     = "time"
	TypeDateTime = "date-time"
	TypeNumber   = "number"
	TypeMoney    = "money"
	TypeBool     = "bool"
	TypeEmail    = "email"
	TypeURL      = "url"
	TypePhone    = "phone"
	TypeCountry  = "country"  // ISO 3166-1: alpha-2, alpha-3 or English name
	TypeCurrency = "currency" // ISO 4217 code or unambiguous symbol
	TypeUSState  = "us-state" // USPS code or name
)

var fieldTypes = setOf(TypeString, TypeDate, TypeTime, TypeDateTime, TypeNumber, TypeMoney,
	TypeBool, TypeEmail, TypeURL, TypePhone, TypeCountry, TypeCurrency, TypeUSState)

// typedRules is a TypedConfig compiled for one tool.
type typedRules struct {
	dateOrder    byte // 0, 'm' (month first) or 'd' (day first)
	ignoreYear   bool
	ignoreZone   bool
	currency     string // ISO code or ""
	currencySign string // the currency's narrow symbol when shared ("$"), or ""
	nanp         bool
	decimalComma bool
	aliases      map[string]string // folded alias or name → folded name
	loc          *time.Location    // TypedConfig.Timezone, or nil
	readings     readingSet        // the readings Grade may use
}

func (t TypedConfig) validate() error {
	var errs []error
	switch t.DateOrder {
	case "", "mdy", "dmy":
	default:
		errs = append(errs, fmt.Errorf("typed.date_order %q: want mdy or dmy", t.DateOrder))
	}
	for k, v := range map[string]string{"year": t.Year, "zone": t.Zone} {
		if v != "" && v != "distinct" && v != "ignore" {
			errs = append(errs, fmt.Errorf("typed.%s %q: want distinct or ignore", k, v))
		}
	}
	if t.Currency != "" {
		if _, ok := isoCurrency(t.Currency); !ok || strings.ToUpper(t.Currency) != t.Currency {
			errs = append(errs, fmt.Errorf("typed.currency %q: not an ISO 4217 code", t.Currency))
		}
	}
	switch t.PhoneRegion {
	case "", "US", "CA":
	default:
		errs = append(errs, fmt.Errorf("typed.phone_region %q: only the NANP regions US and CA are read (other national formats need per-country trunk rules)", t.PhoneRegion))
	}
	if t.Timezone != "" {
		if _, err := time.LoadLocation(t.Timezone); err != nil || t.Timezone == "Local" {
			errs = append(errs, fmt.Errorf("typed.timezone %q: not an IANA time zone name", t.Timezone))
		}
	}
	if err := validAliases(t.Aliases); err != nil {
		errs = append(errs, fmt.Errorf("typed.aliases: %w", err))
	}
	for i, name := range t.ReadingsOff {
		if _, ok := readingBits[name]; !ok {
			errs = append(errs, fmt.Errorf("typed.readings_off[%d] %q: unknown reading (want one of %s, or all)", i, name, strings.Join(readingNames, ", ")))
		}
	}
	return errors.Join(errs...)
}

func validAliases(m map[string]string) error {
	seen := make(map[string]string, len(m))
	for k, v := range m {
		fk, fv := foldKey(k), foldKey(v)
		if fk == "" || fv == "" {
			return errors.New("empty alias or name")
		}
		if prev, ok := seen[fk]; ok && prev != fv {
			return fmt.Errorf("%q names both %q and %q after case folding", k, prev, v)
		}
		seen[fk] = fv
	}
	return nil
}

// compileTyped returns nil when typed comparison is off.
func compileTyped(t TypedConfig) *typedRules {
	if t.Off {
		return nil
	}
	r := &typedRules{
		ignoreYear:   t.Year == "ignore",
		ignoreZone:   t.Zone == "ignore",
		currency:     t.Currency,
		nanp:         t.PhoneRegion != "",
		decimalComma: t.DecimalComma,
		aliases:      foldAliases(t.Aliases),
		readings:     allReadings,
	}
	for _, name := range t.ReadingsOff {
		r.readings &^= readingBits[name]
	}
	if t.DateOrder != "" {
		r.dateOrder = t.DateOrder[0]
	}
	if t.Timezone != "" {
		r.loc, _ = time.LoadLocation(t.Timezone) // validated
	}
	if t.Currency != "" {
		r.currencySign = sharedSign(t.Currency)
	}
	return r
}

// foldAliases folds both sides of a table; every name also names itself.
func foldAliases(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, 2*len(m))
	for k, v := range m {
		fv := foldKey(v)
		out[foldKey(k)] = fv
		out[fv] = fv
	}
	return out
}

// foldKey is the form alias tables match on: case folded, white space
// folded, surrounding space and a final period removed.
func foldKey(s string) string {
	s = strings.TrimSuffix(strings.TrimSpace(s), ".")
	return folder.String(string(appendFolded(nil, s)))
}

// leafInfo is what the walker knows of a leaf when typing it.
type leafInfo struct {
	name    string            // the member name (for array elements, the array's)
	typ     string            // FieldRule.Type, or ""
	aliases map[string]string // FieldRule.Aliases, folded, or nil
	today   date              // the call's reference date, or zero
}

// typedForm returns the typed normal form of an identity leaf, or "" when
// the value stays untyped. It sets *relative when the form is a relative
// date read against li.today.
func (r *typedRules) typedForm(n *node, s *schema, li leafInfo, relative *bool) string {
	switch n.kind {
	case kBool:
		if n.s == "true" {
			return boolTrue
		}
		return boolFalse
	case kNumber:
		if li.typ == TypeString {
			return ""
		}
		if r.currency != "" && (li.typ == TypeMoney || li.typ == "" && moneyName(li.name)) {
			return "money " + r.currency + " " + n.s
		}
		return "number " + n.s
	case kString:
	default:
		return ""
	}
	v := n.s
	if li.typ == TypeString || v == "" || len(v) > maxTypedLen {
		return ""
	}
	if li.aliases != nil {
		if a, ok := li.aliases[foldKey(v)]; ok {
			return "alias " + a
		}
	}
	if r.aliases != nil {
		if a, ok := r.aliases[foldKey(v)]; ok {
			return "alias " + a
		}
	}
	typ := li.typ
	if typ == "" {
		typ = s.typedType(v)
	}
	switch typ {
	case "":
		return r.detect(v, li, relative)
	case "enum":
		// A restated member may differ from the schema's spelling in case
		// and spaces; a value that folds to no member (or to several)
		// stays a string.
		for _, m := range s.enumVals {
			if m == v {
				return "enum " + m
			}
		}
		k, found := foldKey(v), ""
		for _, m := range s.enumVals {
			if foldKey(m) == k {
				if found != "" && found != m {
					return ""
				}
				found = m
			}
		}
		if found == "" {
			return ""
		}
		return "enum " + found
	}
	return r.asType(typ, v, li, relative)
}

// maxTypedLen bounds the values the parsers look at: no date, time,
// amount, address or URL an agent restates is longer.
const maxTypedLen = 512

// typedType is the type the schema gives a string value, or "".
func (s *schema) typedType(v string) string {
	if s == nil {
		return ""
	}
	if len(s.enumVals) > 0 {
		return "enum"
	}
	switch s.format {
	case "date":
		return TypeDate
	case "date-time":
		return TypeDateTime
	case "time":
		return TypeTime
	case "email", "idn-email":
		return TypeEmail
	case "uri", "iri", "url":
		return TypeURL
	}
	for _, t := range s.types {
		switch t {
		case "integer", "number":
			return TypeNumber
		case "boolean":
			return TypeBool
		}
	}
	for _, a := range s.allOf {
		if t := a.typedType(v); t != "" {
			return t
		}
	}
	return ""
}

// asType reads v as the given type only.
func (r *typedRules) asType(typ, v string, li leafInfo, relative *bool) string {
	name := li.name
	switch typ {
	case TypeDate:
		return r.dateForm(v, li.today, relative)
	case TypeTime:
		return r.timeForm(v)
	case TypeDateTime:
		if f := r.dateTimeForm(v); f != "" {
			return f
		}
		return r.dateForm(v, li.today, relative)
	case TypeNumber:
		if f := r.numberForm(v, true); f != "" {
			return f
		}
		return r.moneyForm(v, moneyName(name), typ)
	case TypeMoney:
		return r.moneyForm(v, moneyName(name), typ)
	case TypeBool:
		if b, ok := parseBool(v, true); ok {
			return boolForm(b)
		}
	case TypeEmail:
		if e, ok := parseEmail(v); ok {
			return "email " + e
		}
	case TypeURL:
		if u, ok := parseURL(v); ok {
			return "url " + u
		}
	case TypePhone:
		if p, ok := parsePhone(v, r.nanp); ok {
			return "phone " + p
		}
	case TypeCountry:
		if c, ok := lookupCountry(v); ok {
			return "country " + c
		}
	case TypeCurrency:
		if c, ok := lookupCurrency(v); ok {
			return "currency " + c
		}
	case TypeUSState:
		if c, ok := lookupUSState(v); ok {
			return "us-state " + c
		}
	}
	return ""
}

// detect reads v by its shape alone. The parsers accept disjoint shapes,
// so the order only saves time.
func (r *typedRules) detect(v string, li leafInfo, relative *bool) string {
	var sh shape
	sh.scan(v)
	hints := nameHints(li.name)
	if sh.relative && hints&hintDate != 0 && li.today.y != 0 {
		if f := r.dateForm(v, li.today, relative); f != "" {
			return f
		}
	}
	if sh.at {
		if e, ok := parseEmail(v); ok {
			return "email " + e
		}
		return ""
	}
	if sh.scheme {
		if u, ok := parseURL(v); ok {
			return "url " + u
		}
		return ""
	}
	if !sh.digit {
		if !sh.letter && !sh.sign {
			return ""
		}
		if b, ok := parseBool(v, false); ok {
			return boolForm(b)
		}
		if sh.period {
			if f := r.timeForm(v); f != "" {
				return f
			}
		}
		if sh.month {
			if f := r.dateForm(v, date{}, nil); f != "" {
				return f
			}
		}
		if hints&(hintQuantity|hintMoney) != 0 || sh.sign || sh.currency {
			if f := r.moneyForm(v, hints&hintMoney != 0, ""); f != "" {
				return f
			}
		}
		if hints&hintQuantity != 0 {
			if n, ok := parseNumberWords(v); ok {
				return "number " + n
			}
		}
		return ""
	}
	if sh.plus && sh.digits >= 8 || hints&hintPhone != 0 || strings.HasPrefix(v, "tel:") {
		if p, ok := parsePhone(v, r.nanp); ok {
			return "phone " + p
		}
	}
	if sh.colon && sh.dash {
		if f := r.dateTimeForm(v); f != "" {
			return f
		}
	}
	if sh.month || sh.words == 1 && (sh.dash || sh.slash || sh.dot) {
		if f := r.dateForm(v, date{}, nil); f != "" {
			return f
		}
	}
	if sh.colon || sh.period {
		if f := r.timeForm(v); f != "" {
			return f
		}
	}
	if f := r.numberForm(v, hints&hintQuantity != 0); f != "" {
		if r.currency != "" && hints&hintMoney != 0 {
			return "money " + r.currency + " " + strings.TrimPrefix(f, "number ")
		}
		return f
	}
	if sh.sign || sh.currency {
		return r.moneyForm(v, hints&hintMoney != 0, "")
	}
	return ""
}

const boolTrue, boolFalse = "bool true", "bool false"

func boolForm(b string) string {
	if b == "true" {
		return boolTrue
	}
	return boolFalse
}

// shape is a one-pass summary of a value that lets detect skip parsers
// (it allocates nothing: most identity values are none of the types).
type shape struct {
	digit, letter, at, scheme, colon, dash, slash, dot, plus, sign bool
	month                                                          bool // a word is a month name
	relative                                                       bool // a word is a weekday or one of relativeWords
	period                                                         bool // a word is a day period (am, pm, noon, evening…) or o'clock
	currency                                                       bool // the first or last word is a currency word or ISO code
	digits                                                         int
	words                                                          int
}

func (sh *shape) scan(v string) {
	sh.scanWords(v)
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= '0' && c <= '9':
			sh.digit = true
			sh.digits++
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			sh.letter = true
		case c == '@':
			sh.at = true
		case c == ':':
			sh.colon = true
			if strings.HasPrefix(v[i:], "://") {
				sh.scheme = true
			}
		case c == '-':
			sh.dash = true
		case c == '/':
			sh.slash = true
		case c == '.':
			sh.dot = true
		case c == '+':
			if i == 0 {
				sh.plus = true
			}
		case c == '$' || c >= 0x80:
			// Currency signs: $ and the non-ASCII ones (€, £, ¥, ₹ …).
			sh.sign = true
		}
	}
}

// Field-name hints, read the way classify reads names (English only).

type hint uint8

const (
	hintQuantity hint = 1 << iota
	hintMoney
	hintPhone
	hintDate
)

// hintCache remembers the hints of field names: the same few names come
// in every call. It stops growing at maxHintNames, so arbitrary keys from
// callers cannot fill memory.
var (
	hintCache   sync.Map // string → hint
	hintEntries atomic.Int64
)

const maxHintNames = 4096

// nameHints reads a field name once for all three hints.
func nameHints(name string) hint {
	if h, ok := hintCache.Load(name); ok {
		return h.(hint)
	}
	h := readHints(name)
	if hintEntries.Load() < maxHintNames {
		if _, loaded := hintCache.LoadOrStore(strings.Clone(name), h); !loaded { // name may point into the input
			hintEntries.Add(1)
		}
	}
	return h
}

func readHints(name string) hint {
	n := normalizeName(name)
	var h hint
	if quantityNorm(n) {
		h |= hintQuantity
	}
	if moneyNorm(n) {
		h |= hintMoney
	}
	if phoneNorm(n) {
		h |= hintPhone
	}
	if dateNorm(n) {
		h |= hintDate
	}
	return h
}

var quantityNames = setOf("count", "number", "num", "qty", "quantity", "size", "seats",
	"tickets", "nights", "days", "rooms", "adults", "children", "travelers", "travellers",
	"passengers", "guests", "people", "persons", "riders", "length", "stay_length",
	"party_size", "group_size", "amount", "total", "price")

var quantityPrefixes = []string{"number_of_", "num_", "count_", "total_"}
var quantitySuffixes = []string{"_count", "_size", "_number_of", "_qty", "_quantity", "_amount", "_length", "_days", "_nights"}

// quantityNorm: a field (its normalized name) that holds a count or an
// amount, where number words ("two") are read as numbers.
func quantityNorm(n string) bool {
	if quantityNames[n] {
		return true
	}
	for _, p := range quantityPrefixes {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	for _, s := range quantitySuffixes {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

var moneyNames = setOf("amount", "price", "cost", "fare", "fee", "total", "balance",
	"payment", "charge", "refund", "budget", "salary", "tip")

// moneyName: a field that holds an amount of money, where a bare number is
// in the tool's currency (TypedConfig.Currency).
func moneyName(name string) bool { return moneyNorm(normalizeName(name)) }

func moneyNorm(n string) bool {
	if moneyNames[n] {
		return true
	}
	for _, s := range []string{"_amount", "_price", "_cost", "_fare", "_fee", "_total", "_balance"} {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

func phoneNorm(n string) bool {
	switch n {
	case "phone", "tel", "telephone", "mobile", "cell", "fax", "phone_number", "msisdn":
		return true
	}
	return strings.HasSuffix(n, "_phone") || strings.HasSuffix(n, "_phone_number") ||
		strings.HasSuffix(n, "_mobile") || strings.HasSuffix(n, "_tel")
}

// dateNorm: a field (its normalized name) that holds a day, where a
// relative date ("tomorrow") found by its shape alone is read.
func dateNorm(n string) bool {
	for _, part := range strings.Split(n, "_") {
		switch part {
		case "date", "day", "when":
			return true
		}
	}
	return false
}

// foldFieldAliases copies fields with every alias table folded.
func foldFieldAliases(fields map[string]FieldRule) map[string]FieldRule {
	if len(fields) == 0 {
		return fields
	}
	out := make(map[string]FieldRule, len(fields))
	for pat, r := range fields {
		r.Aliases = foldAliases(r.Aliases)
		out[pat] = r
	}
	return out
}

// TypedEqualities lists the identity fields of a and b (calls of one
// tool) whose values are spelled differently but have the same typed
// normal form, as `path: time "evening 7:30" = "19:30"`, in path order.
// The lines hold argument values: they are for the caller's answer,
// never for logs.
func TypedEqualities(a, b *Call) []string {
	byPath := make(map[string]*Field, len(b.Fields))
	for i := range b.Fields {
		byPath[b.Fields[i].Path] = &b.Fields[i]
	}
	var out []string
	for i := range a.Fields {
		fa := &a.Fields[i]
		fb := byPath[fa.Path]
		if fb == nil || fa.Class != Identity || fb.Class != Identity || fa.Typed == "" || fa.Typed != fb.Typed || fa.Value == fb.Value {
			continue
		}
		typ, _, _ := strings.Cut(fa.Typed, " ")
		out = append(out, fa.Path+": "+typ+" "+fa.Value+" = "+fb.Value)
	}
	return out
}

// UnparsedPaths lists the identity fields whose value is a string that no
// typed rule read: the fields TypedDigest leaves out.
func (c *Call) UnparsedPaths() []string {
	var out []string
	for _, f := range c.Fields {
		if f.Class == Identity && f.Typed == "" && strings.HasPrefix(f.Value, `"`) {
			out = append(out, f.Path)
		}
	}
	return out
}

// scanWords looks up each word of v (letters only, lower-cased in a stack
// buffer) in the month, day-period and currency tables.
func (sh *shape) scanWords(v string) {
	var buf [16]byte
	n, first := 0, true
	for i := 0; i <= len(v); i++ {
		var c byte = ' '
		if i < len(v) {
			c = v[i]
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c >= 'a' && c <= 'z' || c == '\'' || c == '"' {
			if n < len(buf) {
				buf[n] = c
			}
			n++
			continue
		}
		if c == ' ' && i < len(v) {
			sh.words++
		}
		if n > 0 && n <= len(buf) {
			sh.word(buf[:n], first, i == len(v))
		}
		if n > 0 || c >= '0' && c <= '9' {
			first = false
		}
		n = 0
	}
	sh.words++
}

// word notes what one lower-case word w says; first and last say where it
// stands in the value.
func (sh *shape) word(w []byte, first, last bool) {
	if _, ok := months[string(w)]; ok {
		sh.month = true
	}
	if _, ok := weekdays[string(w)]; ok || relativeWords[string(w)] {
		sh.relative = true
	}
	if _, ok := timeWords[string(w)]; ok {
		sh.period = true
	}
	if !first && !last {
		return
	}
	if _, ok := currencyWords[string(w)]; ok {
		sh.currency = true
	} else if len(w) == 3 {
		up := [3]byte{w[0] - 'a' + 'A', w[1] - 'a' + 'A', w[2] - 'a' + 'A'}
		if symbolTables().codes[string(up[:])] {
			sh.currency = true
		}
	}
}

// timeWords are the words that make a time without a colon: day periods,
// "noon", "midnight", "o'clock" (also as "7pm": the digits split it off).
var timeWords = setOf("am", "pm", "morning", "afternoon", "evening", "night", "noon",
	"midnight", "midday", "oclock", "o'clock", `o"clock`, "clock", "a", "p", "m")
