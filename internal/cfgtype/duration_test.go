package cfgtype

import (
	"testing"
	"time"
)

func TestDurationText(t *testing.T) {
	var d Duration
	if err := d.UnmarshalText([]byte("2h30m")); err != nil {
		t.Fatal(err)
	}
	if d.Duration != 150*time.Minute {
		t.Fatalf("got %v", d.Duration)
	}
	if err := d.UnmarshalText([]byte("soon")); err == nil {
		t.Fatal("want an error for a non-duration")
	}
	b, _ := D(90 * time.Second).MarshalText()
	if string(b) != "1m30s" {
		t.Fatalf("marshal: %s", b)
	}
}
