package lore

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// rawMail is a message written out in full, headers included, for the
// cases tmail cannot say (transfer encodings, format=flowed).
type rawMail struct {
	id, from, subject, irt, extra, body string
	min                                 int // minutes after t0
}

func (m rawMail) bytes() []byte {
	from := m.from
	if from == "" {
		from = "Dev One <dev@example.org>"
	}
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var b strings.Builder
	fmt.Fprintf(&b, "From: %s\nTo: linux-rdma@vger.kernel.org\nSubject: %s\nMessage-ID: <%s>\nDate: %s\n",
		from, m.subject, m.id, t0.Add(time.Duration(m.min)*time.Minute).Format(time.RFC1123Z))
	if m.irt != "" {
		fmt.Fprintf(&b, "In-Reply-To: <%s>\nReferences: <%s>\n", m.irt, m.irt)
	}
	b.WriteString(m.extra)
	b.WriteString("\n" + m.body)
	return []byte(b.String())
}

const base40 = "0123456789abcdef0123456789abcdef01234567"

// TestAssembleRealWorldGolden assembles mail written in the shapes that
// lost base-commits, covers, files and trailers in the 2025-26 archives
// (lore's 2025-26 archives), and compares what comes out with a golden file.
func TestAssembleRealWorldGolden(t *testing.T) {
	verbs := "include/rdma/ib_verbs.h"
	svc := "net/sunrpc/xprtrdma/svc_rdma_rw.c"
	qp := "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: quoted-printable\n"
	mails := []rawMail{
		// base-commit ending in CR: quoted-printable "=0D" at the end.
		{id: "qp0", subject: "[PATCH v2 0/1] RDMA/core: cr cover", extra: qp, min: 0,
			body: "Cover text.=0D\n\n---\nbase-commit: " + base40 + "=0D\nchange-id: 20250301-cr-1=0D\n"},
		{id: "qp1", subject: "[PATCH v2 1/1] RDMA/core: cr", irt: "qp0", min: 1, body: diffBody(verbs)},
		// base-commit followed by the branch it is on.
		{id: "br0", from: "Chuck <chuck@example.org>", subject: "[PATCH 0/1] svcrdma: branch remark", min: 10,
			body: "Cover.\n\nbase-commit: " + base40[:12] + "fedcba9876543210fedcba98 (cel/nfsd-testing)\n"},
		{id: "br1", from: "Chuck <chuck@example.org>", subject: "[PATCH 1/1] svcrdma: one", irt: "br0", min: 11, body: diffBody(svc)},
		// [PATCHSET RFC v2 00/02] cover, patches sent unthreaded.
		{id: "ps0", subject: "[PATCHSET RFC v2 00/02] nfsd: patchset", min: 20,
			body: "Cover.\n\nbase-commit: " + base40 + "\n"},
		{id: "ps1", subject: "[PATCH RFC v2 01/02] nfsd: one", min: 21, body: diffBody(svc)},
		{id: "ps2", subject: "[PATCH RFC v2 02/02] nfsd: two", min: 22, body: diffBody(svc)},
		// [PATCHES] cover without counters; a review of the cover.
		{id: "pa0", from: "Leon <leon@example.org>", subject: "[PATCHES] mlx5 fixes", min: 30, body: "Two fixes.\n"},
		{id: "pa1", from: "Leon <leon@example.org>", subject: "[PATCH 1/2] mlx5: a", irt: "pa0", min: 31, body: diffBody(verbs)},
		{id: "pa2", from: "Leon <leon@example.org>", subject: "[PATCH 2/2] mlx5: b", irt: "pa0", min: 32, body: diffBody(verbs)},
		{id: "par", from: "Rev <rev@example.org>", subject: "Re: [PATCHES] mlx5 fixes", irt: "pa0", min: 90,
			body: "Reviewed-by: Rev <rev@example.org>\n"},
		// A plain-subject cover the patches answer; an ack of it.
		{id: "pl0", from: "Anna <anna@example.org>", subject: "NFS/RDMA: plain cover", min: 40,
			body: "These fix x.\n\nbase-commit: " + base40 + "\n"},
		{id: "pl1", from: "Anna <anna@example.org>", subject: "[PATCH 1/2] xprtrdma: a", irt: "pl0", min: 41, body: diffBody(svc)},
		{id: "pl2", from: "Anna <anna@example.org>", subject: "[PATCH 2/2] xprtrdma: b", irt: "pl0", min: 42, body: diffBody(svc)},
		{id: "plr", from: "Maint <m@example.org>", subject: "Re: NFS/RDMA: plain cover", irt: "pl0", min: 100,
			body: "Acked-by: Maint <m@example.org>\n"},
		// A quilt-style diff: git apply -p1 strips whatever prefix.
		{id: "quilt", from: "Old <old@example.org>", subject: "[PATCH] IB/core: quilt", min: 50,
			body: "Quilt.\n\nSigned-off-by: Old <old@example.org>\n---\n" +
				"--- linux-next-orig/include/rdma/ib_verbs.h\t2025-03-01 10:00:00.000000000 +0100\n" +
				"+++ linux-next/include/rdma/ib_verbs.h\t2025-03-01 11:00:00.000000000 +0100\n@@ -1 +1 @@\n-a\n+b\n" +
				"--- linux-next-orig/drivers/infiniband/core/cma.c\n+++ linux-next/drivers/infiniband/core/cma.c\n@@ -1 +1 @@\n-a\n+b\n"},
		// A pull request quoting its diff is not a one-patch series.
		{id: "pull", from: "Jason <jgg@example.org>", subject: "[GIT PULL] Please pull RDMA subsystem changes", min: 60,
			body: "Hi Linus,\n\nThe following changes...\n\n" + diffBody(verbs)[len("Change.\n\nSigned-off-by: Dev One <dev@example.org>\n"):]},
		// Trailers in replies to one patch.
		{id: "tr1", subject: "[PATCH] RDMA/core: trailers", min: 70, body: diffBody(verbs)},
		{id: "tr-attr", from: "Rev <rev@example.org>", subject: "Re: [PATCH] RDMA/core: trailers", irt: "tr1", min: 71,
			body: "From: Dev One\nDate: Sat, 1 Mar 2025 13:10:00\nSubject: [PATCH] RDMA/core: trailers\n\n> Change.\n\n" +
				"Reviewed-by: Rev <rev@example.org>\n"},
		{id: "tr-syz", from: "syzbot <syzbot@syzkaller.appspotmail.com>", subject: "Re: [PATCH] RDMA/core: trailers", irt: "tr1", min: 72,
			body: "Hello,\n\nsyzbot has tested the proposed patch and the reproducer did not trigger any issue:\n\n" +
				"Reported-by: syzbot+0123abcd4567ef89@syzkaller.appspotmail.com\nTested-by: syzbot+0123abcd4567ef89@syzkaller.appspotmail.com\n"},
		{id: "tr-bad", from: "Sloppy <sloppy@example.org>", subject: "Re: [PATCH] RDMA/core: trailers", irt: "tr1", min: 73,
			body: "Reviewed_by: Sloppy <sloppy@example.org>\nReviewed-by:: Sloppy <sloppy@example.org>\n" +
				"Acked-by: Sloppy <sloppy@example.org>> ---\nTested-by: Sloppy <sloppy@example.org> # on mlx5\n"},
		// format=flowed: a Signed-off-by wrapped by the mailer.
		{id: "flow", from: "Flow Er <flow.er.with.a.long.name@example.org>", subject: "[PATCH] RDMA/core: flowed", min: 80,
			extra: "Content-Type: text/plain; charset=utf-8; format=flowed; delsp=yes\n",
			body: "Flowed change.\n\nSigned-off-by: Flow Er  \n<flow.er.with.a.long.name@example.org>\n---\n" +
				"diff --git a/" + verbs + " b/" + verbs + "\n--- a/" + verbs + "\n+++ b/" + verbs + "\n@@ -1 +1 @@\n-a\n+b\n"},
		{id: "flow-r", from: "Fl Ack <ack@example.org>", subject: "Re: [PATCH] RDMA/core: flowed", irt: "flow", min: 81,
			extra: "Content-Type: text/plain; format=flowed\n",
			body:  "Acked-by: Fl Ack \n<ack@example.org>\n"},
		// format=flowed: the last quoted line ends in a space, the
		// trailer under it is not quoted (Thunderbird).
		{id: "fq1", from: "Eric <eric@example.org>", subject: "[PATCH 1/2] RDMA/core: quoted one", min: 110, body: diffBody(verbs)},
		{id: "fq2", from: "Eric <eric@example.org>", subject: "[PATCH 2/2] RDMA/core: quoted two", irt: "fq1", min: 111, body: diffBody(verbs)},
		{id: "fq-r", from: "Hannes <hare@example.org>", subject: "Re: [PATCH 2/2] RDMA/core: quoted two", irt: "fq2", min: 130,
			extra: "Content-Type: text/plain; charset=UTF-8; format=flowed\n",
			body: "On 3/1/25 13:51, Eric wrote:\n> Change that the mailer \n> wrapped, ending in a space \n" +
				"Reviewed-by: Hannes <hare@example.org>\n\nCheers,\n\nHannes\n"},
		// A v2 cover over patches that give no version: they answer it,
		// so they are its v2 (b4 joins them). The third
		// answers a message that is not archived, under the cover.
		{id: "vc0", from: "Thomas <tom@example.org>", subject: "[PATCH v2 0/3] svcrdma: versioned cover", min: 140,
			body: "Cover.\n\nbase-commit: " + base40 + "\n"},
		{id: "vc1", from: "Thomas <tom@example.org>", subject: "[PATCH 1/3] svcrdma: one", irt: "vc0", min: 141, body: diffBody(svc)},
		{id: "vc2", from: "Thomas <tom@example.org>", subject: "[PATCH 2/3] svcrdma: two", irt: "vc0", min: 142, body: diffBody(svc)},
		{id: "vc3", from: "Thomas <tom@example.org>", subject: "[PATCH 3/3] svcrdma: three", min: 143, body: diffBody(svc),
			extra: "In-Reply-To: <vc-offlist>\nReferences: <vc0> <vc-offlist>\n"},
	}
	a := newTestAssembler(t)
	for _, m := range mails {
		if err := a.AddRaw(m.bytes(), time.Time{}); err != nil {
			t.Fatalf("%s: %v", m.id, err)
		}
	}
	var out strings.Builder
	for _, s := range a.Assemble().Series {
		writeSeries(&out, s)
	}
	golden(t, "series/realworld.txt", []byte(out.String()))

	// The wrapped Signed-off-by is one line again, as git mailinfo
	// has it.
	i := slices.IndexFunc(mails, func(m rawMail) bool { return m.id == "flow" })
	m, err := ParseMessage(mails[i].bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Body, "\nSigned-off-by: Flow Er <flow.er.with.a.long.name@example.org>\n") {
		t.Errorf("format=flowed body not unflowed:\n%s", m.Body)
	}
}

// writeSeries writes what the golden files show of a series: its
// summary, root, base, matched paths, patches and trailers.
func writeSeries(out *strings.Builder, s *Series) {
	fmt.Fprintf(out, "%s\n", summary(s))
	fmt.Fprintf(out, "  root=%s base=%q change-id=%q tree=%q matched=%v\n", s.RootMessageID, s.BaseCommit, s.ChangeID, s.TreeTag, s.MatchedPaths)
	for _, tr := range s.Trailers {
		fmt.Fprintf(out, "  all: %s\n", tr)
	}
	for _, p := range s.Patches {
		fmt.Fprintf(out, "  %d %s files=%v\n", p.Index, p.MessageID, p.Files)
		for _, tr := range p.Trailers {
			fmt.Fprintf(out, "    %s\n", tr)
		}
	}
}

func TestUnflow(t *testing.T) {
	for _, tc := range []struct {
		in    string
		delsp bool
		want  string
	}{
		{"a \nb\n", false, "a b\n"},
		{"a \nb\n", true, "ab\n"},
		{" stuffed\n", false, "stuffed\n"},
		{"x \n-- \nsig\n", false, "x \n-- \nsig\n"}, // git flushes the pending line as it is
		{"end \n", false, "end \n"},
		{"crlf \r\nline\r\n", false, "crlf line\n"},
		// Lines of different quote depth are never joined (RFC 3676).
		{"> quoted \nReviewed-by: R <r@example.org>\n", false, "> quoted \nReviewed-by: R <r@example.org>\n"},
		{"> quoted \nReviewed-by: R\n", true, "> quoted\nReviewed-by: R\n"},
		{"a \n> b \n>> c\n", false, "a \n> b \n>> c\n"},
		{" > stuffed \nnot quoted\n", false, "> stuffed not quoted\n"},
		{"> a \n> b\n", false, "> a > b\n"}, // same depth: joined as git does
	} {
		if got := string(unflow([]byte(tc.in), tc.delsp)); got != tc.want {
			t.Errorf("unflow(%q, %v) = %q, want %q", tc.in, tc.delsp, got, tc.want)
		}
	}
}

func TestSplitTrailerLikeB4(t *testing.T) {
	for line, ok := range map[string]bool{
		"Reviewed-by: A <a@example.org>":  true,
		"Reviewed_by: A <a@example.org>":  false,
		"Reviewed-by:: A <a@example.org>": false,
		"  Acked-by: A <a@example.org>":   true,
		"X-Y-Z9: v":                       true,
		"-by: v":                          false,
	} {
		if _, _, got := splitTrailer(line); got != ok {
			t.Errorf("splitTrailer(%q) ok=%v, want %v", line, got, ok)
		}
	}
	for v, glued := range map[string]bool{
		"A <a@example.org>> ---":        true,
		"A <a@example.org> ---":         true,
		"A <a@example.org> # mlx5 bits": false,
		"A <a@example.org> [for x]":     false,
		"A <a@example.org>":             false,
		"a@example.org":                 false,
	} {
		if got := gluedAfterAddress(v); got != glued {
			t.Errorf("gluedAfterAddress(%q) = %v", v, got)
		}
	}
	if !sameMailbox("syzbot+0123abcd@syzkaller.appspotmail.com", "SYZBOT@syzkaller.appspotmail.com") || sameMailbox("a+x@example.org", "b@example.org") {
		t.Error("sameMailbox")
	}
}
