package lore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
)

func TestHasDiff(t *testing.T) {
	tests := []struct {
		body string
		want bool
	}{
		{"text\n---\n+++ b/x\n", true},
		{"diff --git a/x.c b/x.c\nindex 1..2\n", true},
		{"DIFF --GIT a/x b/y\n", true},
		{"GIT binary patch\nliteral 0\n", true},
		{"> diff --git a/x b/x\n", false},
		{"---\n 2 files changed, 3 insertions(+)\n", false},
		{"diff --git nothing here\n", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := hasDiff(tc.body); got != tc.want {
			t.Errorf("hasDiff(%q) = %v", tc.body, got)
		}
	}
}

func TestDiffFiles(t *testing.T) {
	body := "x\n---\n a | 1 +\n\ndiff --git a/net/sunrpc/xprtrdma/svc rdma.c b/net/sunrpc/xprtrdma/svc rdma.c\n" +
		"--- a/net/sunrpc/xprtrdma/svc rdma.c\n+++ b/net/sunrpc/xprtrdma/svc rdma.c\n" +
		"diff --git a/old.c b/new.c\nsimilarity index 90%\nrename from old.c\nrename to new.c\n" +
		"diff --git a/gone.c b/gone.c\ndeleted file mode 100644\n--- a/gone.c\n+++ /dev/null\n" +
		"--- a/plain.c\t2024-01-01\n+++ b/plain.c\t2024-01-02\n"
	got := strings.Join(diffFiles(body), ",")
	want := "net/sunrpc/xprtrdma/svc rdma.c,old.c,new.c,gone.c,plain.c"
	if got != want {
		t.Errorf("diffFiles = %s, want %s", got, want)
	}
}

// DiffChanges: the changed lines and each hunk's function context, per
// file, and nothing of the commit message, the diffstat or the
// signature below the last hunk.
func TestDiffChanges(t *testing.T) {
	body := "Fix the drain.\n\nSigned-off-by: A <a@b>\n---\n drivers/infiniband/core/verbs.c | 3 ++-\n\n" +
		"diff --git a/drivers/infiniband/core/verbs.c b/drivers/infiniband/core/verbs.c\n" +
		"index 1..2 100644\n--- a/drivers/infiniband/core/verbs.c\n+++ b/drivers/infiniband/core/verbs.c\n" +
		"@@ -2838,4 +2838,5 @@ static void ib_drain_qp_done(struct ib_cq *cq, struct ib_wc *wc)\n" +
		" \tstruct ib_drain_cqe *cqe = container_of(wc->wr_cqe, struct ib_drain_cqe,\n\n" +
		"-\tcomplete(&cqe->done);\n+\tif (wc->status == IB_WC_SUCCESS)\n+\t\tcomplete(&cqe->done);\n }\n" +
		"diff --git a/net/x.c b/net/x.c\n--- a/net/x.c\n+++ b/net/x.c\n@@ -1 +1 @@\n-old\n+new\n" +
		"-- \n2.43.0\n"
	var got []string
	for _, c := range DiffChanges(body) {
		got = append(got, fmt.Sprintf("%s|%t|%s", c.File, c.Context, c.Text))
	}
	want := []string{
		"drivers/infiniband/core/verbs.c|true|static void ib_drain_qp_done(struct ib_cq *cq, struct ib_wc *wc)",
		"drivers/infiniband/core/verbs.c|false|\tcomplete(&cqe->done);",
		"drivers/infiniband/core/verbs.c|false|\tif (wc->status == IB_WC_SUCCESS)",
		"drivers/infiniband/core/verbs.c|false|\t\tcomplete(&cqe->done);",
		"net/x.c|false|old",
		"net/x.c|false|new",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("DiffChanges:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if DiffChanges("no diff here\n") != nil {
		t.Error("a body without a diff has changes")
	}
}

func TestFollowupTrailers(t *testing.T) {
	body := "On Mon, X wrote:\n> Signed-off-by: Quoted <q@example.org>\n\nLooks good.\n\n" +
		"Reviewed-by: Some One <one@example.org>\n" +
		"Tested-by: Wrapped Name\n<wrapped@example.org>\n" +
		"Fixes: 0123456789ab (\"svcrdma: a title that\nwraps\")\n" +
		"Acked-by: Tagged <t@example.org> # for the rdma bits\n" +
		"Link: https://lore.kernel.org/r/x@y\n" +
		"Cc: stable@vger.kernel.org\n" +
		"Thanks: not a person\n" +
		"-- \nSignature-by: sig@example.org\n"
	var got []string
	for _, tr := range followupTrailers(body) {
		got = append(got, tr.String())
	}
	want := []string{
		"Reviewed-by: Some One <one@example.org>",
		"Tested-by: Wrapped Name <wrapped@example.org>",
		`Fixes: 0123456789ab ("svcrdma: a title that wraps")`,
		"Acked-by: Tagged <t@example.org> # for the rdma bits",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if tr := followupTrailers(body)[3]; tr.Value != "Tagged <t@example.org>" || tr.Comment != " # for the rdma bits" {
		t.Errorf("comment not split off: %+v", tr)
	}
	from := flow.Address{Name: "Some One", Email: "ONE@example.org"}
	if !trailerFrom(Trailer{Name: "Reviewed-by", Value: "Some One <one@example.org>"}, from) {
		t.Error("same address, other case: not accepted")
	}
	if trailerFrom(Trailer{Name: "Acked-by", Value: "Else <else@example.org>"}, from) {
		t.Error("someone else's Acked-by accepted")
	}
}

func TestAppliedNote(t *testing.T) {
	tests := []struct {
		body string
		want bool
	}{
		{"On Mon, X wrote:\n> text\n\nApplied, thanks!\n\n[1/2] a\n      https://git.kernel.org/rdma/rdma/c/0123456789ab\n", true},
		{"Thanks, applied.\n", true},
		{"Applied to for-next, with the extra comment, thanks\n", true},
		{"applied to rdma-next\n", true},
		{"Applied this series on v6.9 and it crashes.\n", false},
		{"Applied the patch with the following change:\n", true},
		{"Applied and tested the s390 AP bus part of the patch.\n", false},
		{"Applied to which tree?\n", false},
		{"> Applied, thanks!\n", false},
		{"text\n-- \nApplied, thanks!\n", false},
	}
	for _, tc := range tests {
		got, commits := appliedNote(tc.body)
		if got != tc.want {
			t.Errorf("appliedNote(%q) = %v", tc.body, got)
		}
		if got && strings.Contains(tc.body, "git.kernel.org") && len(commits) != 1 {
			t.Errorf("commits %v", commits)
		}
	}
}

func TestPatchworkHash(t *testing.T) {
	a := "Title one.\n\nSigned-off-by: A <a@example.org>\n---\n x.c | 2 +-\n\ndiff --git a/x.c b/x.c\nindex 1..2 100644\n" +
		"--- a/x.c\n+++ b/x.c\n@@ -10,3 +10,3 @@ int f(void)\n ctx\n-old\n+new\n"
	// Another title, other blob ids and line numbers: same patch to b4.
	b := strings.NewReplacer("Title one.", "Title two, reworded.", "index 1..2", "index 3..4", "@@ -10,3 +10,3 @@ int f(void)", "@@ -20,3 +21,3 @@").Replace(a)
	if patchworkHash(a) != patchworkHash(b) {
		t.Error("the same diff hashes differently")
	}
	if patchworkHash(a) == patchworkHash(strings.Replace(a, "+new", "+newer", 1)) {
		t.Error("a changed line does not change the hash")
	}
}
