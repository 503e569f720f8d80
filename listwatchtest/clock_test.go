package listwatchtest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/listwatchtest"
)

// fired reports whether ch holds a value, without waiting.
func fired(ch <-chan time.Time) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestClockStep: Step moves Now forward by exactly what it is given (plus the real time that
// passed) and fires a timer once its time has come, not before; a timer far in the future is not
// fired by the real time.
func TestClockStep(t *testing.T) {
	c := listwatchtest.NewClock()
	before := c.Now()
	timer := c.NewTimer(time.Hour)
	after := c.After(time.Hour + time.Minute)
	if err := c.Step(59 * time.Minute); err != nil {
		t.Fatal(err)
	}
	if d := c.Since(before); d < 59*time.Minute || d > 59*time.Minute+testutil.WaitTimeout {
		t.Fatalf("Since after Step(59m) = %v", d)
	}
	if fired(timer.C()) {
		t.Fatal("a 1h timer fired at 59m")
	}
	if err := c.Step(time.Minute); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-timer.C():
		if at.Sub(before) < time.Hour {
			t.Errorf("the timer fired with %v, an hour after %v expected", at, before)
		}
	default:
		t.Fatal("a 1h timer did not fire at 1h")
	}
	if timer.Stop() {
		t.Error("Stop of a fired timer reported it armed")
	}
	if fired(after) {
		t.Fatal("After(61m) fired at 60m")
	}
	if err := c.SetTime(before.Add(2 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !fired(after) {
		t.Fatal("After(61m) did not fire at 2h")
	}
}

// TestClockRealTime: left alone, the clock runs with the real time: a short timer fires and Sleep
// returns without any Step.
func TestClockRealTime(t *testing.T) {
	c := listwatchtest.NewClock()
	timer := c.NewTimer(time.Millisecond)
	select {
	case <-timer.C():
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("a 1ms timer did not fire by itself")
	}
	c.Sleep(time.Millisecond)
}

// TestClockStopReset: a stopped timer never fires; Reset re-arms it from the current time; both
// report whether the timer was armed.
func TestClockStopReset(t *testing.T) {
	c := listwatchtest.NewClock()
	timer := c.NewTimer(time.Minute)
	if !timer.Stop() {
		t.Error("Stop of an armed timer reported it disarmed")
	}
	if err := c.Step(2 * time.Minute); err != nil {
		t.Fatal(err)
	}
	if fired(timer.C()) {
		t.Fatal("a stopped timer fired")
	}
	if timer.Reset(time.Minute) {
		t.Error("Reset of a stopped timer reported it armed")
	}
	if err := c.Step(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if fired(timer.C()) {
		t.Fatal("a timer reset to 1m fired after 30s")
	}
	if !timer.Reset(time.Minute) {
		t.Error("Reset of an armed timer reported it disarmed")
	}
	if err := c.Step(time.Minute); err != nil {
		t.Fatal(err)
	}
	if !fired(timer.C()) {
		t.Fatal("a reset timer did not fire")
	}
}

// TestClockTicker: a ticker fires every period; a jump over several periods fires it once, as
// FakeClock's; a stopped ticker fires no more.
func TestClockTicker(t *testing.T) {
	c := listwatchtest.NewClock()
	ticker := c.NewTicker(time.Minute)
	if err := c.Step(5 * time.Minute); err != nil {
		t.Fatal(err)
	}
	if !fired(ticker.C()) {
		t.Fatal("the ticker did not fire")
	}
	if fired(ticker.C()) {
		t.Fatal("a jump over five periods fired the ticker more than once")
	}
	if err := c.Step(time.Minute); err != nil {
		t.Fatal(err)
	}
	if !fired(ticker.C()) {
		t.Fatal("the ticker did not fire a period later")
	}
	ticker.Stop()
	if err := c.Step(time.Hour); err != nil {
		t.Fatal(err)
	}
	if fired(ticker.C()) {
		t.Fatal("a stopped ticker fired")
	}
	if c.Tick(0) != nil {
		t.Error("Tick(0) is not nil, as time.Tick's")
	}
}

// TestClockRefusesBackwards: Step with a negative duration and SetTime to the past fail with
// ErrClockBackwards and leave the clock and its timers alone.
func TestClockRefusesBackwards(t *testing.T) {
	c := listwatchtest.NewClock()
	timer := c.NewTimer(time.Hour)
	now := c.Now()
	if err := c.Step(-time.Second); !errors.Is(err, listwatchtest.ErrClockBackwards) {
		t.Errorf("Step(-1s) = %v, want ErrClockBackwards", err)
	}
	if err := c.SetTime(now.Add(-time.Hour)); !errors.Is(err, listwatchtest.ErrClockBackwards) {
		t.Errorf("SetTime(an hour ago) = %v, want ErrClockBackwards", err)
	}
	if got := c.Now(); got.Before(now) || got.Sub(now) > testutil.WaitTimeout {
		t.Errorf("a refused move changed the clock: %v, then %v", now, got)
	}
	if fired(timer.C()) || !timer.Stop() {
		t.Error("a refused move fired or disarmed a timer")
	}
}
