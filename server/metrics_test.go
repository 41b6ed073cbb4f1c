package server

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/ledger"
)

// unused satisfies Checker and Ledger for a server whose routes are not
// called.
type unused struct{}

func (unused) Check(context.Context, funnel.Request) (funnel.Result, error) { panic("not called") }
func (unused) Complete(context.Context, string, string, string, json.RawMessage) (ledger.Record, error) {
	panic("not called")
}
func (unused) Fail(context.Context, string, string, string, json.RawMessage, ledger.ErrorClass) (ledger.Record, error) {
	panic("not called")
}
func (unused) Get(context.Context, string, string) (ledger.Claim, error) { panic("not called") }
func (unused) Workflow(context.Context, string, string) ([]ledger.Record, error) {
	panic("not called")
}
func (unused) Forget(context.Context, string, string, bool) error { panic("not called") }
func (unused) Renew(context.Context, string, string, string, time.Duration) (ledger.Record, error) {
	panic("not called")
}

// TestToolLabelsBounded: a config naming more tools than MaxToolLabels
// labels the first MaxToolLabels and counts the rest as "other".
func TestToolLabelsBounded(t *testing.T) {
	cfg := DefaultConfig()
	for i := range MaxToolLabels + 50 {
		cfg.Tools = append(cfg.Tools, fmt.Sprintf("tool_%04d", i))
	}
	s, err := New(cfg, Deps{Funnel: unused{}, Ledger: unused{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.toolLabel("tool_0000"); got != "tool_0000" {
		t.Errorf("a configured tool is labelled %q", got)
	}
	if got := s.toolLabel(fmt.Sprintf("tool_%04d", MaxToolLabels+10)); got != "other" {
		t.Errorf("a tool past the bound is labelled %q, want other", got)
	}
	if got := s.toolLabel("unknown"); got != "other" {
		t.Errorf("an unknown tool is labelled %q, want other", got)
	}
	if len(s.tools) != MaxToolLabels {
		t.Errorf("%d label values, want %d", len(s.tools), MaxToolLabels)
	}
}
