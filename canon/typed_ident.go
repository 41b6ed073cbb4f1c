package canon

import (
	"strings"
	"sync"

	"golang.org/x/text/language"
	"golang.org/x/text/language/display"
)

// parseEmail reads an address ("Bob@Example.COM", "mailto:bob@example.com",
// "Bob <bob@example.com>") as local@domain with the domain case-folded.
// The local part keeps its case: RFC 5321 leaves it to the receiving host.
func parseEmail(v string) (string, bool) {
	s := strings.TrimSpace(v)
	if i := strings.IndexByte(s, '<'); i >= 0 {
		if !strings.HasSuffix(s, ">") || strings.Count(s, "<") != 1 {
			return "", false
		}
		s = s[i+1 : len(s)-1]
	}
	if len(s) > 7 && strings.EqualFold(s[:7], "mailto:") {
		s = s[7:]
	}
	at := strings.IndexByte(s, '@')
	if at <= 0 || at != strings.LastIndexByte(s, '@') || strings.ContainsAny(s, " \t\"(),:;<>[\\]?") {
		return "", false
	}
	local, domain := s[:at], strings.ToLower(strings.TrimSuffix(s[at+1:], "."))
	labels := strings.Split(domain, ".")
	if len(labels) < 2 {
		return "", false
	}
	for _, l := range labels {
		if l == "" || l[0] == '-' || l[len(l)-1] == '-' {
			return "", false
		}
	}
	return local + "@" + domain, true
}

var defaultPorts = map[string]string{"http": "80", "https": "443", "ws": "80", "wss": "443", "ftp": "21"}

// parseURL normalizes an absolute URL the ways RFC 3986 §6.2.2–6.2.3 call
// equivalent: scheme and host in lower case, percent-encodings in upper
// case and decoded where they encode an unreserved character, dot
// segments removed, the scheme's default port and an empty path ("/" for
// http and https) made one spelling. The query's order is kept: reordered
// parameters are not the same URL to every server.
func parseURL(v string) (string, bool) {
	s := strings.TrimSpace(v)
	i := strings.Index(s, "://")
	if i <= 0 || !isURL(s) {
		return "", false
	}
	for j := 0; j < len(s); j++ {
		if c := s[j]; c <= ' ' || c == 0x7f || c == '"' || c == '<' || c == '>' || c == '\\' || c == '^' || c == '`' || c == '{' || c == '|' || c == '}' {
			return "", false
		}
	}
	scheme := strings.ToLower(s[:i])
	rest := s[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, rest := rest[:end], rest[end:]
	userinfo := ""
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userinfo, authority = authority[:at+1], authority[at+1:]
	}
	host, port := authority, ""
	if c := strings.LastIndexByte(authority, ':'); c >= 0 && !strings.Contains(authority[c:], "]") {
		host, port = authority[:c], authority[c+1:]
		if port != "" && !digits(port) {
			return "", false
		}
	}
	if host == "" {
		return "", false
	}
	host, ok := normPercent(strings.ToLower(host))
	if !ok {
		return "", false
	}
	if port == defaultPorts[scheme] {
		port = ""
	}
	path, query, fragment := rest, "", ""
	hasQuery, hasFragment := false, false
	if h := strings.IndexByte(path, '#'); h >= 0 {
		path, fragment, hasFragment = path[:h], path[h+1:], true
	}
	if q := strings.IndexByte(path, '?'); q >= 0 {
		path, query, hasQuery = path[:q], path[q+1:], true
	}
	if path, ok = normPercent(path); !ok {
		return "", false
	}
	path = removeDotSegments(path)
	if path == "" && (scheme == "http" || scheme == "https") {
		path = "/"
	}
	var b strings.Builder
	b.WriteString(scheme)
	b.WriteString("://")
	if userinfo != "" {
		u, ok := normPercent(userinfo)
		if !ok {
			return "", false
		}
		b.WriteString(u)
	}
	b.WriteString(host)
	if port != "" {
		b.WriteByte(':')
		b.WriteString(port)
	}
	b.WriteString(path)
	if hasQuery {
		if query, ok = normPercent(query); !ok {
			return "", false
		}
		b.WriteByte('?')
		b.WriteString(query)
	}
	if hasFragment {
		if fragment, ok = normPercent(fragment); !ok {
			return "", false
		}
		b.WriteByte('#')
		b.WriteString(fragment)
	}
	return b.String(), true
}

func unreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// normPercent decodes percent-encoded unreserved characters and writes
// the others' hex digits in upper case; a malformed escape is not a URL.
func normPercent(s string) (string, bool) {
	if strings.IndexByte(s, '%') < 0 {
		return s, true
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b = append(b, s[i])
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return "", false
		}
		c := unhex(s[i+1])<<4 | unhex(s[i+2])
		if unreserved(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', hexUpper[c>>4], hexUpper[c&0xf])
		}
		i += 2
	}
	return string(b), true
}

const hexUpper = "0123456789ABCDEF"

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// removeDotSegments is RFC 3986 §5.2.4.
func removeDotSegments(in string) string {
	if !strings.Contains(in, ".") {
		return in
	}
	var out []string
	segs := strings.Split(in, "/")
	for i, seg := range segs {
		last := i == len(segs)-1
		switch seg {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, seg)
		}
	}
	return strings.Join(out, "/")
}

// parsePhone reads a phone number as E.164: "+44 20 7946 0958",
// "+1 (415) 555-0100", "tel:+14155550100"; with nanp also the North
// American national forms "(415) 555-0100", "1-415-555-0100". Extensions
// and letters are refused.
func parsePhone(v string, nanp bool) (string, bool) {
	s := strings.TrimSpace(v)
	if len(s) > 4 && strings.EqualFold(s[:4], "tel:") {
		s = s[4:]
	}
	plus := strings.HasPrefix(s, "+")
	if plus {
		s = s[1:]
	}
	d := make([]byte, 0, 16)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			d = append(d, c)
		case c == ' ' || c == '-' || c == '.' || c == '(' || c == ')':
		default:
			return "", false
		}
	}
	if plus {
		if len(d) < 8 || len(d) > 15 || d[0] == '0' {
			return "", false
		}
		return "+" + string(d), true
	}
	if !nanp {
		return "", false
	}
	if len(d) == 11 && d[0] == '1' {
		d = d[1:]
	}
	// NANP: NPA-NXX-XXXX, area code and exchange starting 2–9.
	if len(d) != 10 || d[0] < '2' || d[3] < '2' {
		return "", false
	}
	return "+1" + string(d), true
}

var (
	countriesOnce sync.Once
	countryNames  map[string]string // folded English name or alpha-3 → alpha-2
)

// lookupCountry reads an ISO 3166-1 country: alpha-2 ("us"), alpha-3
// ("USA") or its CLDR English name ("United States"), as its alpha-2
// code. The table is golang.org/x/text's: every region that is a country
// and has an alpha-3 code, plus "UK", which ISO 3166 reserves for GB.
func lookupCountry(v string) (string, bool) {
	countriesOnce.Do(func() {
		countryNames = map[string]string{"uk": "GB"}
		names := display.English.Regions()
		for a := byte('A'); a <= 'Z'; a++ {
			for b := byte('A'); b <= 'Z'; b++ {
				code := string([]byte{a, b})
				r, err := language.ParseRegion(code)
				if err != nil || !r.IsCountry() || r.ISO3() == "ZZZ" || r.String() != code {
					continue
				}
				countryNames[strings.ToLower(code)] = code
				countryNames[strings.ToLower(r.ISO3())] = code
				if n := names.Name(r); n != "" {
					countryNames[foldKey(n)] = code
				}
			}
		}
	})
	code, ok := countryNames[foldKey(v)]
	return code, ok
}

// usStates is USPS Publication 28, Appendix B: the states, the District
// of Columbia and the inhabited territories. golang.org/x/text has no
// subdivision table and no maintained Go module on the proxy carries one,
// so the 56 pairs are written out here.
var usStates = map[string]string{
	"AL": "Alabama", "AK": "Alaska", "AZ": "Arizona", "AR": "Arkansas", "CA": "California",
	"CO": "Colorado", "CT": "Connecticut", "DE": "Delaware", "FL": "Florida", "GA": "Georgia",
	"HI": "Hawaii", "ID": "Idaho", "IL": "Illinois", "IN": "Indiana", "IA": "Iowa",
	"KS": "Kansas", "KY": "Kentucky", "LA": "Louisiana", "ME": "Maine", "MD": "Maryland",
	"MA": "Massachusetts", "MI": "Michigan", "MN": "Minnesota", "MS": "Mississippi",
	"MO": "Missouri", "MT": "Montana", "NE": "Nebraska", "NV": "Nevada", "NH": "New Hampshire",
	"NJ": "New Jersey", "NM": "New Mexico", "NY": "New York", "NC": "North Carolina",
	"ND": "North Dakota", "OH": "Ohio", "OK": "Oklahoma", "OR": "Oregon", "PA": "Pennsylvania",
	"RI": "Rhode Island", "SC": "South Carolina", "SD": "South Dakota", "TN": "Tennessee",
	"TX": "Texas", "UT": "Utah", "VT": "Vermont", "VA": "Virginia", "WA": "Washington",
	"WV": "West Virginia", "WI": "Wisconsin", "WY": "Wyoming", "DC": "District of Columbia",
	"AS": "American Samoa", "GU": "Guam", "MP": "Northern Mariana Islands", "PR": "Puerto Rico",
	"VI": "U.S. Virgin Islands",
}

var (
	statesOnce sync.Once
	stateNames map[string]string // folded code or name → code
)

// lookupUSState reads a USPS state code or name as its code.
func lookupUSState(v string) (string, bool) {
	statesOnce.Do(func() {
		stateNames = make(map[string]string, 2*len(usStates))
		for code, name := range usStates {
			stateNames[strings.ToLower(code)] = code
			stateNames[foldKey(name)] = code
		}
	})
	code, ok := stateNames[foldKey(v)]
	return code, ok
}
