package lore

import (
	"reflect"
	"testing"
)

// A patch's own trailers are the last paragraph of its message; lines
// under "---" (notes, the diffstat) and in the diff are not, nor is a
// "Name: value" line of an earlier paragraph.
func TestCommitTrailers(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       []Trailer
	}{
		{"fix", "svcrdma: drop the delay\n\nNote: this line is prose.\n\nReported-by: rdmabot <bot@example.org>\nCloses: https://lore.kernel.org/r/20261202.abc-rdmabot@example.org/\nSigned-off-by: Dev <dev@example.org>\n---\nCloses: <notes@x>\n net/x.c | 1 -\n\ndiff --git a/net/x.c b/net/x.c\n+Closes: <diff@x>\n",
			[]Trailer{{Name: "Reported-by", Value: "rdmabot <bot@example.org>"}, {Name: "Closes", Value: "https://lore.kernel.org/r/20261202.abc-rdmabot@example.org/"}, {Name: "Signed-off-by", Value: "Dev <dev@example.org>"}}},
		{"no separator", "x\n\nFixes: 0123456789ab (\"svcrdma: y\")\ndiff --git a/a b/a\n", []Trailer{{Name: "Fixes", Value: "0123456789ab (\"svcrdma: y\")"}}},
		{"wrapped", "x\n\nFixes: 0123456789ab (\"svcrdma: a long\ntitle\")\r\n---\n", []Trailer{{Name: "Fixes", Value: "0123456789ab (\"svcrdma: a long title\")"}}},
		{"none", "x\n\njust prose here\n---\n", nil},
		{"empty", "", nil},
	} {
		if got := CommitTrailers(c.body); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
