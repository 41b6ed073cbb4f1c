package canon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// schema is the part of a tool's JSON Schema that decides field classes:
// where a value sits (properties, items) and what it is (type, format, enum).
// Everything else in the schema is ignored.
type schema struct {
	types       []string
	format      string
	enum        bool     // enum or const
	enumVals    []string // the string members of enum, for typed comparison
	class       Class
	props       map[string]*schema
	addProps    *schema
	items       *schema
	prefixItems []*schema
	anyOf       []*schema // anyOf and oneOf branches
	allOf       []*schema
	rule        string // the rule decide reports, built once
}

// maxSchemaDepth bounds $ref expansion and nesting, so a recursive schema
// cannot loop.
const maxSchemaDepth = 64

// compileSchema reads a JSON Schema document (an OpenAI function's
// "parameters" or an MCP tool's "inputSchema"). Local references
// ("#/$defs/x", "#/definitions/x") are resolved.
func compileSchema(raw json.RawMessage) (*schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var root map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&root); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return buildSchema(root, root, 0)
}

func buildSchema(v any, root map[string]any, depth int) (*schema, error) {
	if depth > maxSchemaDepth {
		return nil, errors.New("schema: nested or referenced too deeply")
	}
	m, ok := v.(map[string]any)
	if !ok {
		// true/false schemas and anything unexpected decide nothing.
		return &schema{}, nil
	}
	if ref, ok := m["$ref"].(string); ok {
		target, err := resolveRef(root, ref)
		if err != nil {
			return nil, err
		}
		return buildSchema(target, root, depth+1)
	}
	s := &schema{}
	switch t := m["type"].(type) {
	case string:
		s.types = []string{t}
	case []any:
		for _, x := range t {
			if str, ok := x.(string); ok && str != "null" {
				s.types = append(s.types, str)
			}
		}
	}
	s.format, _ = m["format"].(string)
	if s.format != "" && identityFormats[s.format] {
		s.rule = "schema:format=" + s.format
	} else if len(s.types) > 0 {
		scalar := true
		for _, t := range s.types {
			if t != "integer" && t != "number" && t != "boolean" {
				scalar = false
			}
		}
		if scalar {
			s.rule = "schema:type=" + strings.Join(s.types, "|")
		}
	}
	_, hasEnum := m["enum"]
	_, hasConst := m["const"]
	s.enum = hasEnum || hasConst
	if ev, ok := m["enum"].([]any); ok {
		for _, x := range ev {
			if str, ok := x.(string); ok {
				s.enumVals = append(s.enumVals, str)
			}
		}
	}
	if c, ok := m["x-idem-class"].(string); ok {
		cl, err := ParseClass(c)
		if err != nil {
			return nil, fmt.Errorf("schema: x-idem-class: %w", err)
		}
		s.class = cl
	}
	if props, ok := m["properties"].(map[string]any); ok {
		s.props = make(map[string]*schema, len(props))
		for k, pv := range props {
			ps, err := buildSchema(pv, root, depth+1)
			if err != nil {
				return nil, err
			}
			s.props[k] = ps
		}
	}
	var err error
	if ap, ok := m["additionalProperties"].(map[string]any); ok {
		if s.addProps, err = buildSchema(ap, root, depth+1); err != nil {
			return nil, err
		}
	}
	switch it := m["items"].(type) {
	case map[string]any:
		if s.items, err = buildSchema(it, root, depth+1); err != nil {
			return nil, err
		}
	case []any: // draft-04 tuple form
		for _, x := range it {
			xs, err := buildSchema(x, root, depth+1)
			if err != nil {
				return nil, err
			}
			s.prefixItems = append(s.prefixItems, xs)
		}
	}
	if pi, ok := m["prefixItems"].([]any); ok {
		for _, x := range pi {
			xs, err := buildSchema(x, root, depth+1)
			if err != nil {
				return nil, err
			}
			s.prefixItems = append(s.prefixItems, xs)
		}
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		if br, ok := m[kw].([]any); ok {
			for _, x := range br {
				xs, err := buildSchema(x, root, depth+1)
				if err != nil {
					return nil, err
				}
				s.anyOf = append(s.anyOf, xs)
			}
		}
	}
	if br, ok := m["allOf"].([]any); ok {
		for _, x := range br {
			xs, err := buildSchema(x, root, depth+1)
			if err != nil {
				return nil, err
			}
			s.allOf = append(s.allOf, xs)
		}
	}
	return s, nil
}

func resolveRef(root map[string]any, ref string) (any, error) {
	if !strings.HasPrefix(ref, "#") {
		return nil, fmt.Errorf("schema: only local $ref is supported, got %q", ref)
	}
	var cur any = root
	for _, part := range strings.Split(strings.TrimPrefix(strings.TrimPrefix(ref, "#"), "/"), "/") {
		if part == "" {
			continue
		}
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("schema: $ref %q does not resolve", ref)
		}
		if cur, ok = m[part]; !ok {
			return nil, fmt.Errorf("schema: $ref %q does not resolve", ref)
		}
	}
	return cur, nil
}

// property returns the subschema for an object member, or nil.
func (s *schema) property(key string) *schema {
	if s == nil {
		return nil
	}
	if p, ok := s.props[key]; ok {
		return p
	}
	if s.addProps != nil {
		return s.addProps
	}
	for _, a := range s.allOf {
		if p := a.property(key); p != nil {
			return p
		}
	}
	// With branches, take the property only if the branches agree on one.
	var found *schema
	for _, b := range s.anyOf {
		if p := b.property(key); p != nil {
			if found != nil {
				return nil
			}
			found = p
		}
	}
	return found
}

// element returns the subschema for array element i, or nil.
func (s *schema) element(i int) *schema {
	if s == nil {
		return nil
	}
	if i < len(s.prefixItems) {
		return s.prefixItems[i]
	}
	if s.items != nil {
		return s.items
	}
	for _, a := range s.allOf {
		if e := a.element(i); e != nil {
			return e
		}
	}
	return nil
}

// identityFormats are JSON Schema formats whose values name one thing
// exactly; a difference in them is a different effect.
var identityFormats = map[string]bool{
	"date": true, "date-time": true, "time": true, "duration": true,
	"email": true, "idn-email": true, "hostname": true, "idn-hostname": true,
	"ipv4": true, "ipv6": true, "uri": true, "uri-reference": true, "iri": true,
	"iri-reference": true, "uri-template": true, "uuid": true, "json-pointer": true,
	"relative-json-pointer": true, "regex": true, "int32": true, "int64": true,
	"float": true, "double": true, "byte": true, "binary": true, "password": true,
}

// decide returns the class the schema gives a leaf, with the rule, or
// ok=false when the schema does not decide.
func (s *schema) decide() (Class, string, bool) {
	if s == nil {
		return 0, "", false
	}
	if s.class != 0 {
		return s.class, "schema:x-idem-class", true
	}
	if s.enum {
		return Identity, "schema:enum", true
	}
	if s.rule != "" {
		return Identity, s.rule, true
	}
	for _, a := range s.allOf {
		if c, r, ok := a.decide(); ok {
			return c, r, true
		}
	}
	// Branches decide only when every one of them decides the same class.
	if len(s.anyOf) > 0 {
		var class Class
		var rule string
		for _, b := range s.anyOf {
			c, r, ok := b.decide()
			if !ok || (class != 0 && c != class) {
				return 0, "", false
			}
			class, rule = c, r
		}
		return class, rule, true
	}
	return 0, "", false
}

// numeric reports whether the schema says the value is a number.
func (s *schema) numeric() bool {
	if s == nil {
		return false
	}
	for _, t := range s.types {
		if t == "integer" || t == "number" {
			return true
		}
	}
	return false
}

// Tool is one tool definition read by ParseTools.
type Tool struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the tool's arguments.
	Schema json.RawMessage
	// Annotations are MCP's behaviour hints; nil where the definition has none.
	ReadOnly, Destructive, Idempotent, OpenWorld *bool
}

// ParseTools reads tool definitions in the forms agents publish them: a JSON
// array (or a single object) of OpenAI function tools
// ({"type":"function","function":{name, description, parameters}}), bare
// functions ({name, description, parameters}) or MCP tools
// ({name, description, inputSchema, annotations}). Every tool must have a
// unique, non-empty name.
func ParseTools(data []byte) ([]Tool, error) {
	data = bytes.TrimSpace(data)
	var raws []json.RawMessage
	if len(data) > 0 && data[0] == '{' {
		raws = []json.RawMessage{data}
	} else if err := json.Unmarshal(data, &raws); err != nil {
		return nil, fmt.Errorf("tools: want a JSON array of tool definitions: %w", err)
	}
	type annotations struct {
		ReadOnly    *bool `json:"readOnlyHint"`
		Destructive *bool `json:"destructiveHint"`
		Idempotent  *bool `json:"idempotentHint"`
		OpenWorld   *bool `json:"openWorldHint"`
	}
	type def struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		InputSchema json.RawMessage `json:"inputSchema"`
		Annotations *annotations    `json:"annotations"`
		Function    *def            `json:"function"`
	}
	seen := map[string]bool{}
	tools := make([]Tool, 0, len(raws))
	for i, raw := range raws {
		var d def
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, fmt.Errorf("tools[%d]: %w", i, err)
		}
		if d.Function != nil {
			d = *d.Function
		}
		if d.Name == "" {
			return nil, fmt.Errorf("tools[%d]: name: missing", i)
		}
		if seen[d.Name] {
			return nil, fmt.Errorf("tools[%d]: name: %q defined twice", i, d.Name)
		}
		seen[d.Name] = true
		t := Tool{Name: d.Name, Description: d.Description, Schema: d.Parameters}
		if len(d.InputSchema) > 0 {
			t.Schema = d.InputSchema
		}
		if d.Annotations != nil {
			t.ReadOnly, t.Destructive = d.Annotations.ReadOnly, d.Annotations.Destructive
			t.Idempotent, t.OpenWorld = d.Annotations.Idempotent, d.Annotations.OpenWorld
		}
		if _, err := compileSchema(t.Schema); err != nil {
			return nil, fmt.Errorf("tools[%d] (%s): %w", i, d.Name, err)
		}
		tools = append(tools, t)
	}
	return tools, nil
}
