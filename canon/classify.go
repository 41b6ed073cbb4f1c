package canon

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// Class says how a leaf of the arguments takes part in duplicate detection.
type Class uint8

const (
	// Identity leaves name what the effect acts on (ids, amounts,
	// recipients, dates, paths, commands, enums, numbers, short tokens).
	// Two calls are the same effect only if their identity leaves are equal.
	Identity Class = iota + 1
	// Text leaves are free prose (subjects, bodies, notes). Only they are
	// embedded and compared by meaning.
	Text
	// Ignored leaves are volatile (request ids, nonces) and take no part in
	// the hash, the identity digest or the text view.
	Ignored
)

func (c Class) String() string {
	switch c {
	case Identity:
		return "identity"
	case Text:
		return "text"
	case Ignored:
		return "ignored"
	}
	return "unset"
}

// ParseClass reads "identity", "text" or "ignored".
func ParseClass(s string) (Class, error) {
	switch s {
	case "identity":
		return Identity, nil
	case "text":
		return Text, nil
	case "ignored":
		return Ignored, nil
	}
	return 0, fmt.Errorf("unknown class %q (want identity, text or ignored)", s)
}

// MarshalText encodes the class by name.
func (c Class) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText decodes a class name.
func (c *Class) UnmarshalText(b []byte) error {
	v, err := ParseClass(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// The value heuristics, applied in this order to a leaf that neither the
// config nor the schema decided. Each returns the rule name reported with
// the field.
//
//  1. volatile name (nonce, request_id, trace_id, …)   → ignored
//  2. null, boolean, number, empty container          → identity
//  3. a string shaped as an email, URL, UUID, ISO date
//     or time, or a number                              → identity
//  4. a field named like prose (body, description, note,
//     message, subject, title, comment, reason, …)      → text
//  5. a field named like an identifier (…id, …_name, address,
//     recipient, path, url, command, amount, date, …)   → identity
//  6. a shell command or SQL statement                 → identity
//  7. no white space (tokens, codes, paths, handles)   → identity
//  8. at most three words, 40 bytes, no sentence stop  → identity
//  9. anything else: multi-word prose                  → text
//
// Limits: names are read in English only; prose of three words or fewer
// ("Fix login bug") counts as identity, so a reworded short title is not
// found by meaning; a long free-form field with an unhinted name counts as
// text, so an address in a field called "where" is compared by meaning
// unless config or schema says otherwise. Config and schema override all
// of this.
func heuristic(name string, n *node) (Class, string) {
	nr := nameRulesOf(name)
	if nr.volatile {
		return Ignored, "heuristic:volatile-name"
	}
	switch n.kind {
	case kNull:
		return Identity, "heuristic:null"
	case kBool:
		return Identity, "heuristic:boolean"
	case kNumber:
		return Identity, "heuristic:number"
	case kArray, kObject:
		return Identity, "heuristic:empty-container"
	}
	s := n.s
	if s == "" {
		return Identity, "heuristic:empty-string"
	}
	if shape := strongShape(s); shape != "" {
		return Identity, shapeRules[shape]
	}
	if nr.text != "" {
		return Text, nr.text
	}
	if nr.identity != "" {
		return Identity, nr.identity
	}
	if looksLikeCommand(s) {
		return Identity, "heuristic:command"
	}
	if looksLikeSQL(s) {
		return Identity, "heuristic:sql"
	}
	words := strings.Fields(s)
	if len(words) == 1 && strings.TrimSpace(s) == s {
		if looksLikePath(s) {
			return Identity, "heuristic:path"
		}
		return Identity, "heuristic:token"
	}
	if len(words) <= 3 && len(s) <= 40 && !strings.ContainsAny(s, ".!?\n") {
		return Identity, "heuristic:short"
	}
	return Text, "heuristic:prose"
}

// nameRule is what a field name alone says to the heuristics.
type nameRule struct {
	volatile       bool
	text, identity string // the rule a prose-like or identifier-like name gives, or ""
}

// nameRuleCache remembers nameRules: the same few field names come in
// every call. It stops growing at maxCachedNames, so arbitrary keys from
// callers cannot fill memory.
var (
	nameRuleCache   sync.Map // string → nameRule
	nameRuleEntries atomic.Int64
)

const maxCachedNames = 4096

func nameRulesOf(name string) nameRule {
	if r, ok := nameRuleCache.Load(name); ok {
		return r.(nameRule)
	}
	norm := normalizeName(name)
	r := nameRule{volatile: volatileNames[norm]}
	// address1, line_2: the number says which of several, not what.
	norm = strings.TrimRight(norm, "0123456789_")
	if r.text = textName(norm); r.text == "" {
		r.identity = identityName(norm)
	}
	if nameRuleEntries.Load() < maxCachedNames {
		if _, loaded := nameRuleCache.LoadOrStore(strings.Clone(name), r); !loaded { // name may point into the input
			nameRuleEntries.Add(1)
		}
	}
	return r
}

// normalizeName turns userId, user-id and USER_ID into user_id.
func normalizeName(name string) string {
	plain := true
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= 'A' && c <= 'Z' || c == '-' || c == ' ' || c == '.' || c >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		return name
	}
	var b strings.Builder
	b.Grow(len(name) + 4)
	prevLower := false
	for _, r := range name {
		switch {
		case r == '-' || r == ' ' || r == '.':
			b.WriteByte('_')
			prevLower = false
		case unicode.IsUpper(r):
			if prevLower {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			prevLower = false
		default:
			b.WriteRune(r)
			prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
		}
	}
	return b.String()
}

var volatileNames = setOf(
	"nonce", "request_id", "req_id", "trace_id", "span_id", "correlation_id",
	"client_request_id", "x_request_id", "idempotency_key", "cache_buster", "cachebuster",
)

var textNames = setOf(
	"body", "text", "content", "contents", "message", "msg", "description", "desc",
	"note", "notes", "comment", "comments", "summary", "subject", "title", "reason",
	"explanation", "instructions", "instruction", "prompt", "caption", "bio",
	"feedback", "review", "details", "question", "answer", "remarks", "memo",
	"headline", "story", "status_text", "justification", "rationale",
)

var textSuffixes = []string{
	"_body", "_text", "_content", "_message", "_description", "_note", "_notes",
	"_comment", "_summary", "_subject", "_title", "_reason", "_explanation",
}

// Rule strings are built once, so classing a leaf allocates nothing.
var (
	textNameRules       = nameRules(textNames)
	textSuffixRules     = suffixRules(textSuffixes)
	identityNameRules   = nameRules(identityNames)
	identitySuffixRules = suffixRules(identitySuffixes)
	shapeRules          = map[string]string{}
)

func init() {
	for _, s := range []string{"uuid", "url", "email", "date", "time", "date-time", "number-string", "expression"} {
		shapeRules[s] = "heuristic:" + s
	}
}

func nameRules(names map[string]bool) map[string]string {
	m := make(map[string]string, len(names))
	for n := range names {
		m[n] = "heuristic:name=" + n
	}
	return m
}

func suffixRules(suffixes []string) [][2]string {
	r := make([][2]string, len(suffixes))
	for i, s := range suffixes {
		r[i] = [2]string{s, "heuristic:name=*" + s}
	}
	return r
}

// textName returns the rule of a prose-like field name, or "".
func textName(n string) string {
	if r, ok := textNameRules[n]; ok {
		return r
	}
	for _, s := range textSuffixRules {
		if strings.HasSuffix(n, s[0]) {
			return s[1]
		}
	}
	return ""
}

var identityNames = setOf(
	"id", "ids", "uuid", "guid", "key", "email", "phone", "url", "uri", "href", "link",
	"path", "file", "filename", "filepath", "dir", "directory", "cmd", "command",
	"script", "sql", "sha", "ref", "branch", "amount", "price", "quantity", "qty",
	"count", "currency", "date", "time", "datetime", "timestamp", "owner", "repo",
	"repository", "account", "user", "username", "recipient", "recipients", "to",
	"from", "cc", "bcc", "sender", "name", "address", "location", "destination",
	"origin", "city", "country", "state", "zip", "zipcode", "postcode", "iban",
	"card", "sku", "code", "host", "hostname", "domain", "channel", "labels", "tags",
)

var identitySuffixes = []string{
	"_id", "_ids", "_key", "_code", "_number", "_num", "_no", "_date", "_time", "_at",
	"_url", "_uri", "_path", "_email", "_phone", "_name", "_address", "_amount",
	"_count", "_type", "_city", "_location", "_sha", "_ref",
}

// identityName returns the rule of an identifier-like field name, or "".
func identityName(n string) string {
	if r, ok := identityNameRules[n]; ok {
		return r
	}
	for _, s := range identitySuffixRules {
		if strings.HasSuffix(n, s[0]) {
			return s[1]
		}
	}
	return ""
}

func setOf(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// strongShape names the shape of a string whose form alone says it is an
// identifier: email, url, uuid, date, time, date-time, number. "" if none.
func strongShape(s string) string {
	if strings.ContainsAny(s, " \t\n") {
		switch {
		case isDateTime(s):
			return "date-time"
		case isExpression(s):
			return "expression"
		}
		return ""
	}
	switch {
	case isUUID(s):
		return "uuid"
	case isURL(s):
		return "url"
	case isEmail(s):
		return "email"
	case isDate(s):
		return "date"
	case isTime(s):
		return "time"
	case isDateTime(s):
		return "date-time"
	}
	if _, ok := numberString(s); ok {
		return "number-string"
	}
	return ""
}

// isExpression: arithmetic such as "(168 + 114) * 2": only digits,
// operators, parentheses and spaces, with at least one digit and one
// operator.
func isExpression(s string) bool {
	digit, op := false, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digit = true
		case strings.IndexByte("+-*/%^", c) >= 0:
			op = true
		case strings.IndexByte("().,= \t", c) >= 0:
		default:
			return false
		}
	}
	return digit && op
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
			continue
		}
		if !isHex(c) {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isURL(s string) bool {
	if strings.HasPrefix(s, "mailto:") || strings.HasPrefix(s, "urn:") {
		return true
	}
	i := strings.Index(s, "://")
	if i <= 0 {
		return false
	}
	for j := 0; j < i; j++ {
		c := s[j]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || j > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return len(s) > i+3
}

func isEmail(s string) bool {
	at := strings.IndexByte(s, '@')
	if at <= 0 || at != strings.LastIndexByte(s, '@') {
		return false
	}
	dom := s[at+1:]
	dot := strings.LastIndexByte(dom, '.')
	return dot > 0 && dot < len(dom)-1
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isDate: YYYY-MM-DD, YYYY/MM/DD.
func isDate(s string) bool {
	if len(s) != 10 || (s[4] != '-' && s[4] != '/') || s[7] != s[4] {
		return false
	}
	return digits(s[:4]) && digits(s[5:7]) && digits(s[8:])
}

// isTime: HH:MM, HH:MM:SS, with optional fraction and zone.
func isTime(s string) bool {
	if len(s) < 5 || s[2] != ':' || !digits(s[:2]) || !digits(s[3:5]) {
		return false
	}
	rest := s[5:]
	if len(rest) >= 3 && rest[0] == ':' && digits(rest[1:3]) {
		rest = rest[3:]
	}
	if len(rest) > 1 && rest[0] == '.' {
		i := 1
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		rest = rest[i:]
	}
	return rest == "" || rest == "Z" || (len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':')
}

// isDateTime: a date, then 'T' or one space, then a time.
func isDateTime(s string) bool {
	if len(s) < 16 || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') {
		return false
	}
	return isDate(s[:10]) && isTime(s[11:])
}

var shellCommands = setOf(
	"ls", "rm", "cp", "mv", "cat", "echo", "git", "curl", "wget", "python", "python3",
	"node", "npm", "npx", "go", "make", "docker", "kubectl", "sudo", "chmod", "chown",
	"mkdir", "rmdir", "touch", "grep", "sed", "awk", "find", "tar", "ssh", "scp",
	"rsync", "psql", "mysql", "pip", "apt", "apt-get", "systemctl", "kill", "pkill",
	"cd", "bash", "sh", "zsh", "terraform", "helm", "aws", "gcloud", "az", "cargo",
	"yarn", "pnpm", "ln", "dd", "truncate", "shutdown", "reboot", "crontab", "export",
)

func looksLikeCommand(s string) bool {
	first, _, _ := strings.Cut(strings.TrimSpace(s), " ")
	if shellCommands[first] || strings.HasPrefix(first, "./") || strings.HasPrefix(first, "/") {
		return true
	}
	for _, op := range []string{" | ", "&&", "||", "$(", "`", " > ", " >> ", " 2>"} {
		if strings.Contains(s, op) {
			return true
		}
	}
	// A word that is a flag: -x or --long.
	for _, w := range strings.Fields(s) {
		if len(w) >= 2 && w[0] == '-' && (isASCIILetter(w[1]) || (w[1] == '-' && len(w) > 2 && isASCIILetter(w[2]))) {
			return true
		}
	}
	return false
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func looksLikeSQL(s string) bool {
	u := strings.ToUpper(strings.TrimSpace(s))
	switch {
	case strings.HasPrefix(u, "SELECT ") && strings.Contains(u, " FROM "),
		strings.HasPrefix(u, "INSERT INTO "),
		strings.HasPrefix(u, "UPDATE ") && strings.Contains(u, " SET "),
		strings.HasPrefix(u, "DELETE FROM "),
		strings.HasPrefix(u, "CREATE TABLE "), strings.HasPrefix(u, "DROP TABLE "),
		strings.HasPrefix(u, "ALTER TABLE "), strings.HasPrefix(u, "TRUNCATE "):
		return true
	}
	return false
}

func looksLikePath(s string) bool {
	if strings.ContainsAny(s, "/\\") || strings.HasPrefix(s, "~") {
		return true
	}
	// name.ext with a short alphanumeric extension.
	dot := strings.LastIndexByte(s, '.')
	if dot <= 0 || dot == len(s)-1 || len(s)-dot-1 > 5 {
		return false
	}
	for _, r := range s[dot+1:] {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			return false
		}
	}
	return utf8.ValidString(s)
}
