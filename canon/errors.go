package canon

import "errors"

// Sentinel errors. Every error Canonicalize returns is an *Error that wraps
// one of these, so callers match with errors.Is and show Error() to users.
var (
	ErrSyntax        = errors.New("canon: malformed JSON")
	ErrNotObject     = errors.New("canon: arguments are not a JSON object")
	ErrDuplicateKey  = errors.New("canon: duplicate key")
	ErrInvalidUTF8   = errors.New("canon: invalid UTF-8")
	ErrTooLarge      = errors.New("canon: arguments too large")
	ErrTooDeep       = errors.New("canon: arguments nested too deeply")
	ErrTooManyLeaves = errors.New("canon: too many leaves")
	ErrStringTooLong = errors.New("canon: string too long")
	ErrNumberRange   = errors.New("canon: number out of range")
	ErrBadTool       = errors.New("canon: invalid tool name")
)

// Error is a problem with one call's input. Path names the place:
// "arguments" for the whole, "arguments.items[2].note" inside, `tool` for the
// tool name.
type Error struct {
	Path   string
	Offset int    // byte offset in the arguments where it was found, -1 if none
	Err    error  // one of the sentinels above
	Detail string // what is wrong, for people
}

func (e *Error) Error() string { return "canon: " + e.Path + ": " + e.Detail }

func (e *Error) Unwrap() error { return e.Err }
