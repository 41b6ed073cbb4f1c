package canon

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Config bounds what Canonicalize accepts and says how each tool's fields
// are classed. The zero value is not usable: start from DefaultConfig.
type Config struct {
	// MaxBytes bounds the arguments' encoded size (for string-wrapped
	// arguments, the size of the JSON text inside the string too).
	MaxBytes int
	// MaxDepth bounds nesting: the arguments object itself is depth 1.
	MaxDepth int
	// MaxLeaves bounds the number of scalar values and empty containers.
	MaxLeaves int
	// MaxStringBytes bounds each string (keys included), after unescaping.
	MaxStringBytes int
	// MaxTextView bounds the text view in bytes; longer views are cut at
	// a character boundary and Call.TextTruncated reports it.
	MaxTextView int
	// Tools holds per-tool settings, by exact tool name.
	Tools map[string]ToolConfig
	// Typed says how identity values are compared by meaning for every
	// tool without its own ToolConfig.Typed. The zero value is on, with
	// the strict rules for partial values (see TypedConfig).
	Typed TypedConfig
}

// ToolConfig says how one tool's arguments are classed and normalized.
type ToolConfig struct {
	// Schema is the JSON Schema of the tool's arguments (an OpenAI
	// function's "parameters", an MCP tool's "inputSchema"); optional.
	Schema json.RawMessage `json:"schema,omitempty" yaml:"schema,omitempty"`
	// Fields maps a path pattern to a rule. A pattern is a path with every
	// array index written as "[]": "amount", "items[].note",
	// `headers["X-Trace"]`. A rule on an object or array applies to
	// everything inside it unless a deeper rule says otherwise.
	Fields map[string]FieldRule `json:"fields,omitempty" yaml:"fields,omitempty"`
	// Normalize applies to every identity field of the tool.
	Normalize Normalize `json:"normalize,omitempty" yaml:"normalize,omitempty"`
	// Typed, when set, replaces Config.Typed for this tool.
	Typed *TypedConfig `json:"typed,omitempty" yaml:"typed,omitempty"`
}

// FieldRule classes a field explicitly and switches on normalizations.
type FieldRule struct {
	// Class, when set, decides the class of the field (and of everything
	// inside it); left unset, the schema and heuristics decide.
	Class Class `json:"class,omitempty" yaml:"class,omitempty"`
	// Normalize adds normalizations for this field's identity values.
	Normalize Normalize `json:"normalize,omitempty" yaml:"normalize,omitempty"`
	// Type reads the field's identity values as one type only (date,
	// time, date-time, number, money, bool, email, url, phone, and the
	// built-in tables country, currency, us-state), or never as a typed
	// value ("string"). Empty: the schema, then the value's shape decide.
	Type string `json:"type,omitempty" yaml:"type,omitempty"`
	// Aliases maps an alias to what it names ("NY": "New York") for this
	// field, before the tool's TypedConfig.Aliases; matched under case
	// and white space folding. Applies only where typed comparison is on.
	Aliases map[string]string `json:"aliases,omitempty" yaml:"aliases,omitempty"`
}

// Normalize switches on normalizations applied to identity values before
// they enter the identity digest. They never change the canonical bytes
// or the hash: those stay exact.
type Normalize struct {
	// FoldCase compares strings under Unicode case folding.
	FoldCase bool `json:"fold_case,omitempty" yaml:"fold_case,omitempty"`
	// Trim removes leading and trailing white space and folds inner runs
	// of white space to one space.
	Trim bool `json:"trim,omitempty" yaml:"trim,omitempty"`
	// NumberStrings compares a string holding a number as that number
	// ("12.50" = 12.5) where the schema says the field is a number.
	NumberStrings bool `json:"number_strings,omitempty" yaml:"number_strings,omitempty"`
}

func (n Normalize) or(m Normalize) Normalize {
	return Normalize{
		FoldCase:      n.FoldCase || m.FoldCase,
		Trim:          n.Trim || m.Trim,
		NumberStrings: n.NumberStrings || m.NumberStrings,
	}
}

// DefaultConfig returns the limits idem uses unless told otherwise.
func DefaultConfig() Config {
	return Config{
		MaxBytes:       256 << 10,
		MaxDepth:       32,
		MaxLeaves:      10_000,
		MaxStringBytes: 64 << 10,
		MaxTextView:    8 << 10,
	}
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.MaxBytes <= 0 {
		errs = append(errs, errors.New("max_bytes must be positive"))
	}
	if c.MaxDepth <= 0 || c.MaxDepth > 10_000 {
		errs = append(errs, errors.New("max_depth must be between 1 and 10000"))
	}
	if c.MaxLeaves <= 0 {
		errs = append(errs, errors.New("max_leaves must be positive"))
	}
	if c.MaxStringBytes <= 0 {
		errs = append(errs, errors.New("max_string_bytes must be positive"))
	}
	if c.MaxTextView <= 0 {
		errs = append(errs, errors.New("max_text_view must be positive"))
	}
	if err := c.Typed.validate(); err != nil {
		errs = append(errs, err)
	}
	for name, t := range c.Tools {
		if err := validToolName(name); err != nil {
			errs = append(errs, fmt.Errorf("tools[%q]: %w", name, err))
		}
		for pat, r := range t.Fields {
			if pat == "" || strings.ContainsAny(pat, "\n\x00") {
				errs = append(errs, fmt.Errorf("tools[%q].fields[%q]: invalid path pattern", name, pat))
			}
			if r.Class > Ignored {
				errs = append(errs, fmt.Errorf("tools[%q].fields[%q]: unknown class", name, pat))
			}
			if r.Type != "" && !fieldTypes[r.Type] {
				errs = append(errs, fmt.Errorf("tools[%q].fields[%q]: unknown type %q", name, pat, r.Type))
			}
			if err := validAliases(r.Aliases); err != nil {
				errs = append(errs, fmt.Errorf("tools[%q].fields[%q].aliases: %w", name, pat, err))
			}
		}
		if t.Typed != nil {
			if err := t.Typed.validate(); err != nil {
				errs = append(errs, fmt.Errorf("tools[%q].%w", name, err))
			}
		}
		if _, err := compileSchema(t.Schema); err != nil {
			errs = append(errs, fmt.Errorf("tools[%q].%w", name, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("canon config: %w", errors.Join(errs...))
	}
	return nil
}
