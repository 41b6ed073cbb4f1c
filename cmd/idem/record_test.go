package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCompleteFailForget drives a record's life from the command line: a
// check executes, idem complete records the result and the next check
// replays it; idem fail --permanent makes a failure replayed; idem forget
// lets a key execute again; refusals exit 2 naming the problem.
func TestCompleteFailForget(t *testing.T) {
	url := startServe(t, map[string]string{"IDEM_EMBEDDER_PROVIDER": "none"})
	check := func(step string) (code int, res map[string]any) {
		t.Helper()
		call := `{"session_id":"s1","workflow_id":"wf","step_id":"` + step + `","tool":"charge","arguments":{"card":"c-` + step + `","amount":10}}`
		code, out, errs := runIdem(t, "", "check", "--server", url, "--json", call)
		if code != 0 && code != exitFlagged {
			t.Fatalf("check %s: exit %d %s", step, code, errs)
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("check %s: %v\n%s", step, err, out)
		}
		return code, res
	}
	_, first := check("1")
	key, token := first["key"].(string), first["token"].(string)
	if first["decision"] != "execute" || token == "" {
		t.Fatalf("first check: %v", first)
	}

	code, out, errs := runIdem(t, `{"charge_id":"ch_1"}`, "complete", "--server", url, key, token)
	if code != 0 || !strings.Contains(out, "status      SUCCESS") || !strings.Contains(out, "next check  replay_result") || !strings.Contains(out, `result      {"charge_id":"ch_1"}`) {
		t.Fatalf("complete (result from stdin): exit %d\n%s%s", code, out, errs)
	}
	if strings.Contains(out, "confirmed") {
		t.Errorf("a record not confirmed prints a confirmation:\n%s", out)
	}
	if code, again := check("1"); code != exitFlagged || again["decision"] != "duplicate" || !strings.Contains(mustJSON(t, again["match"]), `"charge_id":"ch_1"`) {
		t.Errorf("check after complete: exit %d %v", code, again)
	}
	// The same token again: the record is finished, 409, exit 2.
	if code, _, errs := runIdem(t, "", "complete", "--server", url, key, token, `{"charge_id":"ch_2"}`); code != 2 || !strings.Contains(errs, "409") {
		t.Errorf("complete twice: exit %d %s", code, errs)
	}

	_, second := check("2")
	code, out, errs = runIdem(t, "", "fail", "--permanent", "--server", url, second["key"].(string), second["token"].(string), `{"error":"card declined"}`)
	if code != 0 || !strings.Contains(out, "status      FAILED") || !strings.Contains(out, "next check  replay_error") || !strings.Contains(out, "(permanent)") {
		t.Fatalf("fail --permanent: exit %d\n%s%s", code, out, errs)
	}
	if _, again := check("2"); again["decision"] != "duplicate" || !strings.Contains(mustJSON(t, again["match"]), "card declined") {
		t.Errorf("check after a permanent failure: %v", again)
	}

	_, third := check("3")
	code, out, _ = runIdem(t, "", "fail", "--json", "--server", url, third["key"].(string), third["token"].(string))
	var rec map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec["next_check"] != "execute" || rec["error_class"] != "transient" {
		t.Errorf("fail (transient, --json): exit %d\n%s", code, out)
	}

	// A call confirmed as another action than an earlier one: its record
	// says so.
	code, out, errs = runIdem(t, "", "check", "--server", url, "--json",
		`{"session_id":"s1","workflow_id":"wf","step_id":"4","tool":"charge","arguments":{"card":"c-4","amount":10},"confirmed":"`+key+`"}`)
	var fourth map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &fourth) != nil || fourth["decision"] != "execute" {
		t.Fatalf("confirmed check: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runIdem(t, "", "complete", "--server", url, fourth["key"].(string), fourth["token"].(string), `1`)
	if code != 0 || !strings.Contains(out, "confirmed   "+key+" (another action than it)") {
		t.Errorf("complete of a confirmed call: exit %d\n%s%s", code, out, errs)
	}

	if code, out, errs := runIdem(t, "", "forget", "--server", url, key); code != 0 || !strings.Contains(out, "forgot "+key) {
		t.Fatalf("forget: exit %d %s %s", code, out, errs)
	}
	if _, again := check("1"); again["decision"] != "execute" {
		t.Errorf("check after forget: %v", again)
	}
	if code, _, errs := runIdem(t, "", "forget", "--server", url, "wf:nope:charge"); code != 2 || !strings.Contains(errs, "404") {
		t.Errorf("forget an unknown key: exit %d %s", code, errs)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"complete", "--server", url, key}, "usage: idem complete"},
		{[]string{"complete", "--server", url, key, "tok", "not json"}, "RESULT is not a JSON value"},
		{[]string{"fail", "--server", url, key, "tok", "{"}, "ERROR is not a JSON value"},
		{[]string{"complete", "--permanent", "--server", url, key, "tok", "1"}, "--permanent"},
		{[]string{"forget", "--server", url}, "usage: idem forget"},
		{[]string{"complete", "--bogus", key, "tok", "1"}, "bogus"},
	} {
		if code, _, errs := runIdem(t, "", tc.args...); code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("idem %s: exit %d, stderr %q: want 2 and %q", strings.Join(tc.args, " "), code, errs, tc.want)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
