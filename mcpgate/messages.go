package mcpgate

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idem-dev/idem/client"
)

// The texts below are what the model reads when idem did not let a call
// run, or when its outcome is unknown. Each says what happened and what
// to do next; none quotes the call's arguments.

// maxQuoted bounds the earlier result quoted in a confirm.
const maxQuoted = 1500

func confirmText(tool string, res *client.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "idem did not run this call of %s: a very similar call already ran in this session", tool)
	m := res.Match
	if m != nil && m.Similarity > 0 && m.Similarity < 1 {
		fmt.Fprintf(&b, " (similarity %.2f)", m.Similarity)
	}
	b.WriteString(".")
	if m != nil {
		if r, ok := readResult(m.Result); ok {
			if t := r.text(); t != "" {
				fmt.Fprintf(&b, " Its result was: %s", truncate(t, maxQuoted))
			}
		}
	}
	fmt.Fprintf(&b, "\nIf that earlier call already did what you intended, use its result and do not call %s again. "+
		"If this call is really meant to run a second time, call %s again with the same arguments plus %q: %q.",
		tool, tool, ConfirmArgument, matchKey(res))
	return b.String()
}

func uncertainText(tool, key string, lost bool) string {
	why := "its lease ran out without a result"
	if lost {
		why = "the upstream server exited, timed out or answered unreadably while running it"
	}
	return fmt.Sprintf("idem did not run this call of %s: an earlier execution of the same call (key %q) started, "+
		"but its outcome was never recorded (%s), so it may or may not have taken effect. "+
		"First find out whether it did, for example with a read-only tool that shows the current state. "+
		"If it did, do not call %s again. If it did not, call %s again with the same arguments plus %q: %q.",
		tool, key, why, tool, tool, ConfirmArgument, key)
}

func inProgressText(tool, key string) string {
	return fmt.Sprintf("idem did not run this call of %s: the same call (key %q) is being executed right now. "+
		"Do not run it a second time; call %s again with the same arguments in a little while to get its result.",
		tool, key, tool)
}

func lostText(tool, key string) string {
	k := ""
	if key != "" {
		k = fmt.Sprintf(" (key %q)", key)
	}
	return fmt.Sprintf("idem mcp: the upstream server's connection ended while it was running this call of %s%s, "+
		"so it may or may not have taken effect. Do not repeat it blindly: first find out whether it did, "+
		"for example with a read-only tool that shows the current state.", tool, k)
}

func timeoutText(tool string, d time.Duration, key string) string {
	k := ""
	if key != "" {
		k = fmt.Sprintf(" (key %q)", key)
	}
	return fmt.Sprintf("idem mcp: the upstream server did not answer this call of %s within %s%s; "+
		"it may still be running, or may have taken effect. Do not repeat it blindly: first find out whether it did.", tool, d, k)
}

func malformedText(tool, key string) string {
	return fmt.Sprintf("idem mcp: the upstream server's answer to this call of %s could not be read (it is not a tool result), "+
		"so whether the call took effect is unknown (key %q). Find out whether it did before repeating it.", tool, key)
}

func confirmUnsupportedText(tool string) string {
	return fmt.Sprintf("idem did not run this call of %s: it carries %q, but the idem this gateway uses cannot take a "+
		"confirmation yet. Tell the user that idem held the call back as a possible repeat, and ask how to proceed.",
		tool, ConfirmArgument)
}

// truncate cuts s to at most n bytes at a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
