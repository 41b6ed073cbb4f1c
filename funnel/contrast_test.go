package funnel

import (
	"strings"
	"testing"
)

// TestSwappedKindIsNoDuplicate: two emails that differ only in which of
// two weekdays, rooms, cities or agencies they name score 0.95 and more with the
// encoder; the contrast guard's lexicon tells them apart, so the second
// executes (with a note saying why) instead of being asked about as the
// first's duplicate. A rewording of the first is still caught.
func TestSwappedKindIsNoDuplicate(t *testing.T) {
	for _, tc := range []struct{ first, second string }{
		{"Please schedule a visit to Pine Meadows Apartments for next Tuesday.", "Please schedule a visit to Pine Meadows Apartments for next Friday."},
		{"Please play Highway Tune on the kitchen speaker.", "Please play Highway Tune on the bedroom speaker."},
		{"Book me a table for dinner in Chicago.", "Book me a table for dinner in Seattle."},
		{"Please forward the incident report to the FBI.", "Please forward the incident report to the CIA."},
	} {
		e := newEnv(t, options{})
		e.run(t, Request{Step: "1", Tool: "send_email", Arguments: email(tc.first)}, `{"message_id":"m-1"}`)
		res := e.check(t, Request{Step: "2", Tool: "send_email", Arguments: email(tc.second)})
		if res.Decision != Execute {
			t.Errorf("%q after %q: %s at %s (%s), want execute", tc.second, tc.first, res.Decision, res.Stage, res.Reason)
		}
		if !hasNote(res, "differs in words of the same kind") {
			t.Errorf("%q after %q: notes %v do not say the text differs in words of the same kind", tc.second, tc.first, res.Notes)
		}
	}
	e := newEnv(t, options{})
	e.run(t, Request{Step: "1", Tool: "send_email", Arguments: email("Please play Highway Tune on the kitchen speaker.")}, `{"message_id":"m-1"}`)
	res := e.check(t, Request{Step: "2", Tool: "send_email", Arguments: email("Please play Highway Tune on the speaker in the kitchen.")})
	want(t, res, Confirm, StageSemantic)
}

func email(body string) []byte {
	return []byte(`{"to":"ann@example.com","subject":"A request","body":` + strings.ReplaceAll(`"`+body+`"`, "\n", " ") + `}`)
}
