// Package clienttest gives tests of code that uses the client a clock they
// drive, so that no test of Guard's lease renewals depends on the
// machine's speed.
package clienttest

import (
	"sync"
	"time"
)

// StepClock is a client.Clock the test drives: every After sends the
// duration asked for on Waits and returns when the test calls Tick. It is
// safe for concurrent use.
type StepClock struct {
	mu  sync.Mutex // guards now
	now time.Time
	// Waits receives each duration After is asked to wait; a test reads
	// it to know that a wait has begun.
	Waits chan time.Duration
	ticks chan time.Time
}

// NewStepClock returns a clock set to start.
func NewStepClock(start time.Time) *StepClock {
	return &StepClock{now: start, Waits: make(chan time.Duration), ticks: make(chan time.Time)}
}

// Now returns the clock's time.
func (c *StepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After reports d on Waits, then returns a channel that fires at the next
// Tick.
func (c *StepClock) After(d time.Duration) <-chan time.Time {
	c.Waits <- d
	return c.ticks
}

// Tick advances the clock by d and ends the wait in progress (it blocks
// until one is).
func (c *StepClock) Tick(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	c.ticks <- c.Now()
}
