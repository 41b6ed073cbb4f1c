package config

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/idem-dev/idem/funnel"
)

// MaxFileBytes bounds a configuration file.
const MaxFileBytes = 1 << 20

// Load returns the configuration data describes (YAML; empty means all
// defaults), with the environment variables lookupEnv finds applied on top
// (nil: none), validated. Keys absent from the file keep their defaults;
// a policy's absent keys take DefaultPolicy's values. Unknown and
// duplicate keys are errors. Every error is an *Error (matching
// ErrInvalid) naming the key and line, joined with errors.Join.
func Load(data []byte, lookupEnv func(string) (string, bool)) (Config, error) {
	cfg := Default()
	if len(data) > MaxFileBytes {
		return cfg, &Error{Key: "(file)", Msg: fmt.Sprintf("larger than %d bytes", MaxFileBytes)}
	}
	var keys []keyPos
	var root ast.Node
	if len(bytes.TrimSpace(data)) > 0 {
		f, err := parse(data)
		if err != nil {
			// Name the key: parse again, leniently, for the keys' places.
			if lf, lerr := parse(data, parser.AllowDuplicateMapKey()); lerr == nil && len(lf.Docs) > 0 {
				keys = collectKeys(lf.Docs[0], "", nil)
			}
			return cfg, yamlError(err, keys)
		}
		if len(f.Docs) > 1 {
			return cfg, &Error{Key: "(file)", Msg: "more than one YAML document"}
		}
		if len(f.Docs) == 1 && f.Docs[0].Body != nil {
			root = f.Docs[0].Body
		}
	}
	if root != nil {
		if _, ok := root.(*ast.MappingNode); !ok {
			if _, ok := root.(*ast.MappingValueNode); !ok {
				if _, isComment := root.(*ast.CommentGroupNode); !isComment {
					return cfg, &Error{Key: "(file)", Line: root.GetToken().Position.Line, Msg: "want a mapping of keys"}
				}
				root = nil
			}
		}
	}
	if root != nil {
		var af aliasFinder
		if ast.Walk(&af, root); af.at != nil {
			return cfg, &Error{Key: "(file)", Line: af.at.GetToken().Position.Line,
				Msg: "YAML aliases (*name) are not supported: write the value out"}
		}
		keys = collectKeys(root, "", nil)
		if err := checkDurations(root); err != nil {
			return cfg, err
		}
		if err := unmarshal(data, &cfg); err != nil {
			return cfg, yamlError(err, keys)
		}
		fillPolicies(&cfg, keys)
	}
	if lookupEnv != nil {
		if err := applyEnv(&cfg, lookupEnv); err != nil {
			return cfg, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, placeErrors(err, keys, lookupEnv)
	}
	return cfg, nil
}

// unmarshal decodes strictly. go-yaml v1.19.2 panics on some malformed
// input (a nil dereference in decodeSlice for "policies:\n  !|-name: a");
// that is reported as an error, never let through.
func unmarshal(data []byte, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the YAML decoder failed on this input (%v)", p)
		}
	}()
	return yaml.UnmarshalWithOptions(data, v, yaml.Strict())
}

func parse(data []byte, opts ...parser.Option) (f *ast.File, err error) {
	defer func() {
		if p := recover(); p != nil {
			f, err = nil, fmt.Errorf("the YAML parser failed on this input (%v)", p)
		}
	}()
	return parser.ParseBytes(data, 0, opts...)
}

// aliasFinder finds the first alias. Aliases are refused: expanding them
// can make a small file decode into an exponentially large value.
type aliasFinder struct{ at ast.Node }

func (a *aliasFinder) Visit(n ast.Node) ast.Visitor {
	if a.at != nil {
		return nil
	}
	if _, ok := n.(*ast.AliasNode); ok {
		a.at = n
		return nil
	}
	return a
}

// keyPos is where a key (or a list item) sits in the file.
type keyPos struct {
	path      string // "store.sync_writes", "policies[1].name"
	line, col int
	value     string // the scalar value, if the key holds one
}

func collectKeys(n ast.Node, prefix string, out []keyPos) []keyPos {
	switch n := n.(type) {
	case *ast.DocumentNode:
		if n.Body != nil {
			out = collectKeys(n.Body, prefix, out)
		}
	case *ast.MappingNode:
		for _, v := range n.Values {
			out = collectKeys(v, prefix, out)
		}
	case *ast.MappingValueNode:
		name := n.Key.GetToken().Value
		p := name
		if prefix != "" {
			p = prefix + "." + name
		}
		pos := n.Key.GetToken().Position
		kp := keyPos{path: p, line: pos.Line, col: pos.Column}
		if sc, ok := n.Value.(ast.ScalarNode); ok && sc.GetToken() != nil {
			kp.value = sc.GetToken().Value
		}
		out = append(out, kp)
		if n.Value != nil {
			out = collectKeys(n.Value, p, out)
		}
	case *ast.SequenceNode:
		for i, v := range n.Values {
			p := fmt.Sprintf("%s[%d]", prefix, i)
			if v == nil {
				continue
			}
			pos := v.GetToken().Position
			out = append(out, keyPos{path: p, line: pos.Line, col: pos.Column})
			out = collectKeys(v, p, out)
		}
	case *ast.AnchorNode:
		out = collectKeys(n.Value, prefix, out)
	case *ast.TagNode:
		out = collectKeys(n.Value, prefix, out)
	}
	return out
}

// checkDurations reports every duration key (budget, store.gc_interval,
// policies[1].lease, …) whose value time.ParseDuration refuses, naming the
// key and its line: the YAML decoder's own error for them carries neither.
func checkDurations(root ast.Node) error {
	var errs []error
	walkDurations(root, reflect.TypeFor[Config](), "", &errs)
	return errors.Join(errs...)
}

// walkDurations appends to errs the bad durations under n, the node the Go
// type t decodes, whose key is path.
func walkDurations(n ast.Node, t reflect.Type, path string, errs *[]error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n := n.(type) {
	case *ast.MappingNode:
		for _, v := range n.Values {
			walkDurations(v, t, path, errs)
		}
	case *ast.MappingValueNode:
		name := n.Key.GetToken().Value
		var ft reflect.Type
		switch t.Kind() {
		case reflect.Struct:
			for i := 0; i < t.NumField(); i++ {
				if yamlName(t.Field(i)) == name {
					ft = t.Field(i).Type
				}
			}
		case reflect.Map:
			ft = t.Elem()
		}
		if ft == nil || n.Value == nil {
			return // an unknown key: the strict decoder names it
		}
		p := name
		if path != "" {
			p = path + "." + name
		}
		if ft == durationType {
			if err := badDuration(n.Value, p); err != nil {
				*errs = append(*errs, err)
			}
			return
		}
		walkDurations(n.Value, ft, p, errs)
	case *ast.SequenceNode:
		if t.Kind() != reflect.Slice {
			return
		}
		for i, v := range n.Values {
			if v != nil {
				walkDurations(v, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
			}
		}
	case *ast.TagNode:
		walkDurations(n.Value, t, path, errs)
	case *ast.AnchorNode:
		walkDurations(n.Value, t, path, errs)
	}
}

// badDuration is the error for a duration key whose string value does not
// parse; other values (null, a number) are left to the decoder, whose
// errors for them carry the line.
func badDuration(v ast.Node, key string) error {
	for {
		tag, ok := v.(*ast.TagNode)
		if !ok {
			break
		}
		v = tag.Value
	}
	sc, ok := v.(*ast.StringNode)
	if !ok {
		return nil
	}
	if _, err := time.ParseDuration(sc.Value); err != nil {
		line := v.GetToken().Position.Line
		return &Error{Key: key, Line: line, Msg: fmt.Sprintf("%q is not a duration: write a number and a unit (ns, us, ms, s, m, h), e.g. 50ms, 5m, 1h30m", sc.Value)}
	}
	return nil
}

// keyAt is the deepest key on line at or before col.
func keyAt(keys []keyPos, line, col int) string {
	best := ""
	bestCol := -1
	for _, k := range keys {
		if k.line == line && k.col <= col && k.col >= bestCol {
			best, bestCol = k.path, k.col
		}
	}
	if best == "" {
		// A value on a line of its own (a block scalar, a flow list):
		// the nearest key above it.
		for _, k := range keys {
			if k.line < line {
				best = k.path
			}
		}
	}
	return best
}

// lineOf is the line of key, or of its nearest ancestor in the file.
func lineOf(keys []keyPos, key string) int {
	for key != "" {
		for _, k := range keys {
			if k.path == key {
				return k.line
			}
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			return 0
		}
		key = key[:i]
	}
	return 0
}

// yamlError turns a go-yaml error into an *Error naming key and line.
func yamlError(err error, keys []keyPos) error {
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil {
		pos := ye.GetToken().Position
		key := keyAt(keys, pos.Line, pos.Column)
		if key == "" {
			key = "(file)"
		}
		return &Error{Key: key, Line: pos.Line, Msg: cleanYAMLMessage(ye.GetMessage())}
	}
	// An error from a value's own decoder (a duration, say) carries no
	// position; its message quotes the value: find the key holding it.
	msg := err.Error()
	if i := strings.IndexByte(msg, '"'); i >= 0 {
		if q, uerr := strconv.QuotedPrefix(msg[i:]); uerr == nil {
			v, _ := strconv.Unquote(q)
			for _, k := range keys {
				if k.value == v && v != "" {
					return &Error{Key: k.path, Line: k.line, Msg: msg}
				}
			}
		}
	}
	return &Error{Key: "(file)", Msg: msg}
}

func cleanYAMLMessage(m string) string {
	// "cannot unmarshal string into Go struct field Config.Store of type
	// bool": the Go names mean nothing to a user; keep the types.
	if i := strings.Index(m, " into Go struct field "); i >= 0 {
		if j := strings.LastIndex(m, " of type "); j > i {
			return m[:i] + " into a value of type " + goTypeName(m[j+len(" of type "):])
		}
	}
	return m
}

func goTypeName(t string) string {
	switch t {
	case "time.Duration":
		return "duration (e.g. 50ms, 5m)"
	case "int", "int64", "uint64", "int32":
		return "integer"
	case "float64":
		return "number"
	case "bool":
		return "boolean"
	}
	return t
}

// fillPolicies gives each policy from the file DefaultPolicy's value for
// every key it does not set.
func fillPolicies(cfg *Config, keys []keyPos) {
	present := map[string]bool{}
	for _, k := range keys {
		present[k.path] = true
	}
	if !present["policies"] {
		return
	}
	write, read := reflect.ValueOf(funnel.DefaultPolicy()), reflect.ValueOf(funnel.DefaultPolicies()[0])
	for i := range cfg.Policies {
		// A policy of read-only tools takes the read-only default's values
		// (replay, execute when uncompared), any other the default's.
		dv := write
		if ro := cfg.Policies[i].ReadOnly; ro != nil && *ro {
			dv = read
		}
		pv := reflect.ValueOf(&cfg.Policies[i]).Elem()
		t := pv.Type()
		for j := 0; j < t.NumField(); j++ {
			tag := yamlName(t.Field(j))
			if tag == "" || tag == "name" {
				continue
			}
			if !present[fmt.Sprintf("policies[%d].%s", i, tag)] {
				pv.Field(j).Set(dv.Field(j))
			}
		}
	}
}

func yamlName(f reflect.StructField) string {
	tag := f.Tag.Get("yaml")
	name, _, _ := strings.Cut(tag, ",")
	if name == "-" {
		return ""
	}
	return name
}

var durationType = reflect.TypeFor[time.Duration]()

// EnvVar is one environment variable that overrides a key.
type EnvVar struct {
	Name, Key string
}

// EnvVars lists every environment variable Load reads, with its key.
func EnvVars() []EnvVar {
	var out []EnvVar
	c := Default()
	walkScalars(reflect.ValueOf(&c).Elem(), nil, func(path []string, _ reflect.Value) {
		out = append(out, EnvVar{Name: envName(path), Key: strings.Join(path, ".")})
	})
	return out
}

func envName(path []string) string {
	return "IDEM_" + strings.ToUpper(strings.Join(path, "_"))
}

func walkScalars(v reflect.Value, path []string, fn func([]string, reflect.Value)) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		name := yamlName(t.Field(i))
		if name == "" {
			continue
		}
		f := v.Field(i)
		p := append(slices.Clip(path), name)
		switch {
		case f.Type() == durationType:
			fn(p, f)
		case f.Kind() == reflect.Struct:
			walkScalars(f, p, fn)
		case f.Kind() == reflect.Slice, f.Kind() == reflect.Map, f.Kind() == reflect.Pointer:
		default:
			fn(p, f)
		}
	}
}

func applyEnv(cfg *Config, lookup func(string) (string, bool)) error {
	var errs []error
	walkScalars(reflect.ValueOf(cfg).Elem(), nil, func(path []string, f reflect.Value) {
		name := envName(path)
		s, ok := lookup(name)
		if !ok {
			return
		}
		if f.Kind() == reflect.String {
			f.SetString(s)
			return
		}
		nv := reflect.New(f.Type())
		if err := unmarshal([]byte(s), nv.Interface()); err != nil || strings.TrimSpace(s) == "" {
			msg := fmt.Sprintf("%q is not a %s", s, goTypeName(f.Type().String()))
			errs = append(errs, &Error{Key: strings.Join(path, "."), Env: name, Msg: msg})
			return
		}
		f.Set(nv.Elem())
	})
	return errors.Join(errs...)
}

// placeErrors adds the line (or the environment variable) to each of
// Validate's errors.
func placeErrors(err error, keys []keyPos, lookup func(string) (string, bool)) error {
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	envOf := map[string]string{}
	for _, v := range EnvVars() {
		envOf[v.Key] = v.Name
	}
	out := make([]error, 0, len(list))
	for _, e := range list {
		var ce *Error
		if errors.As(e, &ce) {
			c := *ce
			if name, ok := envOf[c.Key]; ok && lookup != nil {
				if _, set := lookup(name); set {
					c.Env = name
				}
			}
			if c.Env == "" {
				c.Line = lineOf(keys, c.Key)
			}
			out = append(out, &c)
			continue
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

// Marshal returns cfg as YAML, every key spelled out: the effective
// configuration.
func Marshal(cfg Config) ([]byte, error) {
	return yaml.MarshalWithOptions(cfg, yaml.Indent(2), yaml.IndentSequence(true))
}
