package ledger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestKeyFor(t *testing.T) {
	tests := []struct {
		name  string
		in    KeyInput
		want  string
		field string // non-empty: want a FieldError naming it
	}{
		{"position", KeyInput{Workflow: "wf-1", Step: "3", Tool: "send_email"}, "wf-1:3:send_email", ""},
		{"explicit key wins", KeyInput{IdempotencyKey: "order-77", Workflow: "wf", Step: "1", Tool: "ship"}, "#4:ship:8:order-77", ""},
		{"explicit key without position", KeyInput{IdempotencyKey: "order-77", Tool: "ship"}, "#4:ship:8:order-77", ""},
		{"explicit key with colons and hashes", KeyInput{IdempotencyKey: "wf:1:t#s1", Tool: "a:b"}, "#3:a:b:9:wf:1:t#s1", ""},
		{"transient retry keeps the key", KeyInput{Workflow: "wf", Step: "1", Tool: "t", Attempt: 3}, "wf:1:t", ""},
		{"sampling retry by attempt", KeyInput{Workflow: "wf", Step: "1", Tool: "t", Sampling: true, Attempt: 3}, "wf:1:t#s3", ""},
		{"sampling retry of explicit key", KeyInput{IdempotencyKey: "k", Tool: "t", Sampling: true, Attempt: 2}, "#1:t:1:k#s2", ""},
		{"sampling retry by previous error", KeyInput{Workflow: "wf", Step: "1", Tool: "t", Sampling: true,
			PreviousError: []byte(`{"error":"rate limited"}`)}, "wf:1:t#e", ""},
		{"tool may contain a colon", KeyInput{Workflow: "wf", Step: "1", Tool: "github:create_issue"}, "wf:1:github:create_issue", ""},
		{"empty workflow", KeyInput{Step: "1", Tool: "t"}, "", "workflow_id"},
		{"empty step", KeyInput{Workflow: "wf", Tool: "t"}, "", "step_id"},
		{"empty tool", KeyInput{Workflow: "wf", Step: "1"}, "", "tool"},
		{"explicit key without tool", KeyInput{IdempotencyKey: "k"}, "", "tool"},
		{"colon in workflow", KeyInput{Workflow: "a:b", Step: "1", Tool: "t"}, "", "workflow_id"},
		{"colon in step", KeyInput{Workflow: "a", Step: "1:2", Tool: "t"}, "", "step_id"},
		{"hash in tool", KeyInput{Workflow: "a", Step: "1", Tool: "t#s1"}, "", "tool"},
		{"sampling without attempt or error", KeyInput{Workflow: "wf", Step: "1", Tool: "t", Sampling: true}, "", "attempt"},
		{"negative attempt", KeyInput{IdempotencyKey: "k", Tool: "t", Sampling: true, Attempt: -1}, "", "attempt"},
		{"oversized explicit key", KeyInput{IdempotencyKey: strings.Repeat("k", MaxKeyBytes), Tool: "t"}, "", "idempotency_key"},
		{"oversized position", KeyInput{Workflow: strings.Repeat("w", MaxKeyBytes), Step: "1", Tool: "t"}, "", "key"},
		{"invalid UTF-8", KeyInput{IdempotencyKey: "\xff", Tool: "t"}, "", "idempotency_key"},
		{"NUL in the key", KeyInput{IdempotencyKey: "a\x00b", Tool: "t"}, "", "idempotency_key"},
		{"CR in the key", KeyInput{IdempotencyKey: "a\rb", Tool: "t"}, "", "idempotency_key"},
		{"LF in the key", KeyInput{IdempotencyKey: "a\nb", Tool: "t"}, "", "idempotency_key"},
		{"DEL in the key", KeyInput{IdempotencyKey: "a\x7fb", Tool: "t"}, "", "idempotency_key"},
		{"C1 control in the key", KeyInput{IdempotencyKey: "a\u0085b", Tool: "t"}, "", "idempotency_key"},
		{"LF in workflow", KeyInput{Workflow: "w\n", Step: "1", Tool: "t"}, "", "workflow_id"},
		{"NUL in step", KeyInput{Workflow: "w", Step: "\x001", Tool: "t"}, "", "step_id"},
		{"tab in tool", KeyInput{Workflow: "w", Step: "1", Tool: "t\t"}, "", "tool"},
		{"invalid UTF-8 in tool", KeyInput{IdempotencyKey: "k", Tool: "\xfe"}, "", "tool"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := KeyFor(tc.in)
			if tc.field != "" {
				fe, ok := errors.AsType[*FieldError](err)
				if !ok || fe.Field != tc.field {
					t.Fatalf("KeyFor = %q, %v; want an error naming %q", got, err, tc.field)
				}
				if !errors.Is(err, ErrInvalidInput) && !errors.Is(err, ErrTooLarge) {
					t.Fatalf("error %v matches no sentinel", err)
				}
				return
			}
			if err != nil || !strings.HasPrefix(got, tc.want) {
				t.Fatalf("KeyFor = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestKeyForErrorDigest(t *testing.T) {
	key := func(prev string) string {
		k, err := KeyFor(KeyInput{IdempotencyKey: "k", Tool: "t", Sampling: true, PreviousError: []byte(prev)})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a, b := key("timeout"), key("rate limited")
	if a == b || a == "#1:t:1:k" || a != key("timeout") {
		t.Fatalf("error-derived keys: %q %q; want distinct, stable and different from the base", a, b)
	}
}

// TestKeyNamespacesNeverAlias: positional, explicit and derived keys of
// every combination of awkward parts (colons, hashes, suffix look-alikes,
// digits and lengths) are all distinct, each strips back to its own base,
// and an explicit key names its tool.
func TestKeyNamespacesNeverAlias(t *testing.T) {
	parts := []string{"a", "b", "a:b", "b:c", "c", "a#s1", "s1", "#s1", "1:a", "#1:a:1:a", "K", "K#s1", "K#e0123456789abcdef", "wf:1:t"}
	tools := []string{"t", "a", "a:b", "s1", "1:a"}
	seen := map[string]KeyInput{}
	add := func(in KeyInput) {
		k, err := KeyFor(in)
		if err != nil {
			return
		}
		if prev, ok := seen[k]; ok {
			t.Fatalf("%+v and %+v share key %q", prev, in, k)
		}
		seen[k] = in
		base := in
		base.Sampling, base.Attempt, base.PreviousError = false, 0, nil
		bk, err := KeyFor(base)
		if err != nil {
			t.Fatalf("%+v: its base %+v has no key: %v", in, base, err)
		}
		if got := BaseKey(k); got != bk {
			t.Fatalf("BaseKey(%q) = %q, want %q", k, got, bk)
		}
		if in.IdempotencyKey != "" {
			tool, key, _, ok := parseExplicit(k)
			if !ok || tool != in.Tool || key != in.IdempotencyKey {
				t.Fatalf("%q parses as tool %q key %q (%v), want %q and %q", k, tool, key, ok, in.Tool, in.IdempotencyKey)
			}
		} else if _, _, _, ok := parseExplicit(k); ok {
			t.Fatalf("positional key %q parses as an explicit one", k)
		}
	}
	for _, tool := range tools {
		for _, sampling := range []KeyInput{{}, {Sampling: true, Attempt: 1}, {Sampling: true, Attempt: 12}, {Sampling: true, PreviousError: []byte("e")}} {
			for _, k := range parts {
				in := sampling
				in.IdempotencyKey, in.Tool = k, tool
				add(in)
			}
			for _, w := range parts {
				for _, s := range parts {
					in := sampling
					in.Workflow, in.Step, in.Tool = w, s, tool
					add(in)
				}
			}
		}
	}
	if len(seen) < 500 {
		t.Fatalf("only %d keys made: the test lost its inputs", len(seen))
	}
}

func FuzzKeyFor(f *testing.F) {
	f.Add("order-77", "", "", "ship", false, 0)
	f.Add("", "wf", "1", "t", true, 3)
	f.Add("K#s1", "", "", "t", true, 1)
	f.Fuzz(func(t *testing.T, key, workflow, step, tool string, sampling bool, attempt int) {
		in := KeyInput{IdempotencyKey: key, Workflow: workflow, Step: step, Tool: tool, Sampling: sampling, Attempt: attempt}
		k, err := KeyFor(in)
		if err != nil {
			if _, ok := errors.AsType[*FieldError](err); !ok {
				t.Fatalf("KeyFor(%+v): %v is not a field error", in, err)
			}
			return
		}
		if checkKey(k) != nil || len(k) > MaxKeyBytes {
			t.Fatalf("KeyFor(%+v) = %q, which checkKey refuses", in, k)
		}
		explicit := strings.HasPrefix(k, "#")
		if explicit != (key != "") {
			t.Fatalf("KeyFor(%+v) = %q in the wrong namespace", in, k)
		}
		if explicit {
			gotTool, gotKey, suffix, ok := parseExplicit(k)
			if !ok || gotTool != tool || gotKey != key || (suffix != "") != sampling {
				t.Fatalf("%q parses as %q %q %q %v", k, gotTool, gotKey, suffix, ok)
			}
		}
		if (BaseKey(k) != k) != sampling {
			t.Fatalf("BaseKey(%q) = %q (sampling %v)", k, BaseKey(k), sampling)
		}
	})
}

type statusErr int

func (e statusErr) Error() string   { return fmt.Sprintf("HTTP %d", int(e)) }
func (e statusErr) StatusCode() int { return int(e) }

type classErr ErrorClass

func (e classErr) Error() string          { return "classified" }
func (e classErr) ErrorClass() ErrorClass { return ErrorClass(e) }

func TestClassifyStatus(t *testing.T) {
	for code, want := range map[int]ErrorClass{
		408: ClassTransient, 429: ClassTransient, 502: ClassTransient, 503: ClassTransient, 504: ClassTransient,
		400: ClassPermanent, 401: ClassPermanent, 403: ClassPermanent, 404: ClassPermanent, 409: ClassPermanent, 422: ClassPermanent,
		500: ClassTransient, 418: ClassTransient, 0: ClassTransient, 200: ClassNone, 204: ClassNone,
	} {
		if got := ClassifyStatus(code); got != want {
			t.Errorf("ClassifyStatus(%d) = %v, want %v", code, got, want)
		}
	}
}

func TestClassifyError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want ErrorClass
	}{
		{"nil", nil, ClassNone},
		{"deadline", context.DeadlineExceeded, ClassTransient},
		{"wrapped deadline", fmt.Errorf("call tool: %w", os.ErrDeadlineExceeded), ClassTransient},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, ClassTransient},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), ClassTransient},
		{"unexpected EOF", io.ErrUnexpectedEOF, ClassTransient},
		{"429", fmt.Errorf("post: %w", statusErr(429)), ClassTransient},
		{"503", statusErr(503), ClassTransient},
		{"404", fmt.Errorf("post: %w", statusErr(404)), ClassPermanent},
		{"422", statusErr(422), ClassPermanent},
		{"self-classified permanent", fmt.Errorf("x: %w", classErr(ClassPermanent)), ClassPermanent},
		{"unknown", errors.New("something odd"), ClassTransient},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClassifyError(tc.err); got != tc.want {
				t.Errorf("ClassifyError(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		field  string
	}{
		{"zero lease", func(c *Config) { c.Lease = 0 }, "Lease"},
		{"negative retention", func(c *Config) { c.Retention = -time.Hour }, "Retention"},
		{"zero result bound", func(c *Config) { c.MaxResultBytes = 0 }, "MaxResultBytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.mutate(&cfg)
			if _, err := New(nopStore{}, cfg); err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("New: %v, want an error naming %s", err, tc.field)
			}
		})
	}
	if _, err := New(nil, DefaultConfig()); err == nil {
		t.Fatal("New accepted a nil store")
	}
}

// nopStore only satisfies the interface, for constructor tests.
type nopStore struct{ Store }
