package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/client"
)

// An agent loop: every side-effecting tool call goes through Guard.
func ExampleClient_Guard() {
	idem, _ := client.New(client.DefaultConfig("http://127.0.0.1:8080"))
	runTool := func(ctx context.Context, key, tool string, args json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"ok":true}`), nil // call the real tool here, passing key downstream
	}
	for _, call := range []struct{ step, tool, args string }{{"1", "send_email", `{"to":"ann@example.com","body":"Your invoice"}`}} {
		out, err := idem.Guard(context.Background(), client.CheckRequest{
			SessionID: "chat-42", WorkflowID: "run-7", StepID: call.step, Tool: call.tool, Arguments: json.RawMessage(call.args),
		}, func(ctx context.Context, key string) (json.RawMessage, error) {
			return runTool(ctx, key, call.tool, json.RawMessage(call.args))
		})
		var flagged *client.FlaggedError
		switch {
		case errors.As(err, &flagged):
			fmt.Println("to the model:", flagged) // confirm / uncertain / in progress: show the model why
		case err != nil:
			fmt.Println("tool error:", err) // recorded as transient or permanent
		default:
			fmt.Println("tool result:", string(out)) // fresh, or the recorded result of the earlier call
		}
	}
}
