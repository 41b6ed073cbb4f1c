package funnel

import (
	"context"
	"fmt"
	"testing"
)

// TestQueueStats: what the encoder queue reports (the server's
// idem_encoder_* gauges): claimed calls' texts wait in the background
// queue while the encoder runs a batch, and nothing is left once it has
// settled.
func TestQueueStats(t *testing.T) {
	hold := "the first body"
	enc := newGatedEncoder(encoder(t), hold)
	e := newEnv(t, options{embedder: enc})
	send := func(i int, body string) {
		args := fmt.Appendf(nil, `{"to":"r%d@example.com","subject":"Hello","body":%q}`, i, body)
		want(t, e.check(t, Request{Step: fmt.Sprint(i), Tool: "send_email", Arguments: args}), Execute, StageNew)
	}
	send(0, "This is "+hold+", held by the encoder.")
	<-enc.held // the first call's text is being embedded, after its claim
	for i := 1; i <= 3; i++ {
		send(i, fmt.Sprintf("Another message, number %d, to another person.", i))
	}
	if got, want := e.f.QueueStats(), (QueueStats{Background: 3, Running: 1}); got != want {
		t.Errorf("while the encoder holds a batch: %+v, want %+v", got, want)
	}
	close(enc.release)
	if err := e.f.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.f.QueueStats(); got != (QueueStats{}) {
		t.Errorf("once settled: %+v, want nothing queued or running", got)
	}
}
