package lab

import "testing"

// The test's size reads as it is said: "an 8 MiB file", "a 16 MiB file".
func TestArticle(t *testing.T) {
	for n, want := range map[int]string{1: "a", 4: "a", 8: "an", 11: "an", 16: "a", 18: "an", 64: "a", 80: "an", 110: "a", 800: "an", 11000: "an", 1100: "a"} {
		if got := article(n); got != want {
			t.Errorf("article(%d) = %q, want %q", n, got, want)
		}
	}
}
