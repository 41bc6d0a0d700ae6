package lore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
)

// messageSummary is what the golden files pin for each real message.
type messageSummary struct {
	MessageID  string         `json:"message_id"`
	MessageIDs []string       `json:"message_ids,omitempty"`
	InReplyTo  string         `json:"in_reply_to,omitempty"`
	References []string       `json:"references,omitempty"`
	From       flow.Address   `json:"from"`
	To         []flow.Address `json:"to,omitempty"`
	Cc         []flow.Address `json:"cc,omitempty"`
	Date       string         `json:"date"`
	ReceivedAt string         `json:"received_at"`
	Subject    string         `json:"subject"`
	RawSubject string         `json:"raw_subject"`
	ListIDs    []string       `json:"list_ids,omitempty"`
	BodyBytes  int            `json:"body_bytes"`
	BodySHA256 string         `json:"body_sha256"`
	BodyHead   []string       `json:"body_head"`
	Fields     int            `json:"header_fields"`
}

func summarize(m *flow.Message) messageSummary {
	sum := sha256.Sum256([]byte(m.Body))
	lines := strings.SplitN(m.Body, "\n", 7)
	if len(lines) > 6 {
		lines = lines[:6]
	}
	s := messageSummary{
		MessageID: m.MessageID, InReplyTo: m.InReplyTo, References: m.References,
		From: m.From, To: m.To, Cc: m.Cc,
		Date: m.Date.Format(time.RFC3339), ReceivedAt: m.ReceivedAt.Format(time.RFC3339),
		Subject: m.Subject, RawSubject: m.RawSubject, ListIDs: m.ListIDs,
		BodyBytes: len(m.Body), BodySHA256: hex.EncodeToString(sum[:]), BodyHead: lines,
		Fields: len(m.Header),
	}
	if len(m.MessageIDs) > 1 {
		s.MessageIDs = m.MessageIDs
	}
	return s
}

func TestParseMessageGolden(t *testing.T) {
	for _, f := range threadFiles(t) {
		name := filepath.Join(filepath.Base(filepath.Dir(f)), strings.TrimSuffix(filepath.Base(f), ".eml"))
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			m, err := ParseMessage(raw)
			if err != nil {
				t.Fatal(err)
			}
			if m.MessageID == "" || m.DerivedID {
				t.Errorf("real message without its Message-ID: %+v", m.MessageIDs)
			}
			if m.Date.IsZero() {
				t.Errorf("no Date parsed from %q", m.Header.Get("Date"))
			}
			out, err := json.MarshalIndent(summarize(m), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("messages", name+".json"), append(out, '\n'))
		})
	}
}

func TestParseMessageHeaders(t *testing.T) {
	raw := "From: =?UTF-8?Q?J=C3=B6rg_R=C3=B6del?= <joro@example.org>\r\n" +
		"To: a@example.org, \"Last, First\" <b@example.org>\r\n" +
		"Cc: Broken.Name <c@example.org>, d@example.org (Dee)\r\n" +
		"Subject: [PATCH v2 09/12] svcrdma: Move write_info for Reply chunks into\r\n" +
		" struct svc_rdma_send_ctxt\r\n" +
		"Message-ID:\r\n <170708864817.28128.1@bazille.1015granger.net>\r\n" +
		"Message-Id: <second@example.org>\r\n" +
		"In-Reply-To: <cover@example.org>\r\n" +
		"References: <root@example.org>\r\n\t<cover@example.org>\r\n" +
		"Date: Sun, 04 Feb 2024 18:17:28 -0500\r\n" +
		"List-Id: <linux-rdma.vger.kernel.org>\r\n" +
		"\r\n" +
		"body line\r\n"
	m, err := ParseMessage([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, got, want any) {
		t.Helper()
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if string(gj) != string(wj) {
			t.Errorf("%s = %s, want %s", what, gj, wj)
		}
	}
	check("MessageID", m.MessageID, "170708864817.28128.1@bazille.1015granger.net")
	check("MessageIDs", m.MessageIDs, []string{"170708864817.28128.1@bazille.1015granger.net", "second@example.org"})
	check("InReplyTo", m.InReplyTo, "cover@example.org")
	check("References", m.References, []string{"root@example.org", "cover@example.org"})
	check("From", m.From, flow.Address{Name: "Jörg Rödel", Email: "joro@example.org"})
	check("To", m.To, []flow.Address{{Email: "a@example.org"}, {Name: "Last, First", Email: "b@example.org"}})
	check("Cc", m.Cc, []flow.Address{{Name: "Broken.Name", Email: "c@example.org"}, {Name: "Dee", Email: "d@example.org"}})
	check("Subject", m.Subject, "[PATCH v2 09/12] svcrdma: Move write_info for Reply chunks into struct svc_rdma_send_ctxt")
	check("RawSubject", m.RawSubject, " [PATCH v2 09/12] svcrdma: Move write_info for Reply chunks into\n struct svc_rdma_send_ctxt")
	check("ListIDs", m.ListIDs, []string{"linux-rdma.vger.kernel.org"})
	check("Body", m.Body, "body line\n")
	if want := time.Date(2024, 2, 4, 23, 17, 28, 0, time.UTC); !m.Date.Equal(want) {
		t.Errorf("Date = %v, want %v", m.Date, want)
	}
}

func TestParseMessageBodies(t *testing.T) {
	tests := []struct {
		name, raw, body string
	}{
		{"quoted-printable",
			"Subject: x\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: quoted-printable\n\n" +
				"a =3D b=\n c=C3=A9 =ZZ end\n",
			"a = b cé =ZZ end\n"},
		{"base64 latin1",
			"Subject: x\nContent-Type: text/plain; charset=ISO-8859-1\nContent-Transfer-Encoding: base64\n\n" +
				"Y2Fm6SBkaWZm\nCg==\n",
			"café diff\n"},
		{"8bit without charset kept as is",
			"Subject: x\n\nJ\xf6rg\n",
			"J\xf6rg\n"},
		{"multipart picks text, skips html and binaries",
			"Subject: x\nContent-Type: multipart/mixed; boundary=\"XX\"\n\npreamble\n--XX\nContent-Type: text/plain\n\nhello\n--XX\n" +
				"Content-Type: text/html\n\n<p>hello</p>\n--XX\nContent-Type: text/x-patch; name=a.patch\nContent-Disposition: attachment\n\n" +
				"diff --git a/x b/x\n--XX\nContent-Type: application/pgp-signature\n\nsig\n--XX--\nepilogue\n",
			"hello\ndiff --git a/x b/x"},
		{"nested alternative",
			"Subject: x\nContent-Type: multipart/mixed; boundary=o\n\n--o\nContent-Type: multipart/alternative; boundary=i\n\n--i\n" +
				"Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: quoted-printable\n\nna=C3=AFve\n--i\nContent-Type: text/html\n\n<b>x</b>\n--i--\n--o--\n",
			"naïve"},
		{"patch attached as octet-stream",
			"Subject: x\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nsee attached\n--b\n" +
				"Content-Type: application/octet-stream; name=\"0001-fix.patch\"\nContent-Transfer-Encoding: base64\n\nZGlmZiAtLWdpdAo=\n" +
				"--b\nContent-Type: application/octet-stream; name=\"blob.bin\"\n\nxx\n--b--\n",
			"see attached\ndiff --git\n"},
		{"no body", "Subject: x\n", ""},
		{"CRLF to LF", "Subject: x\r\n\r\nline1\r\nline2\r\n", "line1\nline2\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseMessage([]byte(tc.raw))
			if err != nil {
				t.Fatal(err)
			}
			if m.Body != tc.body {
				t.Errorf("Body = %q, want %q", m.Body, tc.body)
			}
		})
	}
}

func TestParseMessageDerivedID(t *testing.T) {
	raw := []byte("From: A <a@example.org>\nSubject: no id\nDate: Mon, 1 Jul 2024 15:42:28 +0300\n\nhello\n")
	m1, err := ParseMessage(raw)
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := ParseMessage(raw)
	if !m1.DerivedID || m1.MessageID != m2.MessageID {
		t.Fatalf("derived ids %q / %q (derived %v)", m1.MessageID, m2.MessageID, m1.DerivedID)
	}
	if !strings.HasPrefix(m1.MessageID, "20240701124228.") || !strings.HasSuffix(m1.MessageID, "@z") {
		t.Errorf("derived id %q is not in public-inbox's <date>.<hash>@z form", m1.MessageID)
	}
	other, _ := ParseMessage([]byte(strings.Replace(string(raw), "hello", "bye", 1)))
	if other.MessageID == m1.MessageID {
		t.Errorf("different bodies share the derived id %q", other.MessageID)
	}
}

func TestParseMessageMalformed(t *testing.T) {
	tests := []struct {
		name, raw, reason string
	}{
		{"empty", "", "empty message"},
		{"garbage", "\x00\xff\xfe binary junk\n\nbody", "not a field"},
		{"continuation first", " folded\nSubject: x\n\n", "continuation"},
		{"blank first", "\nbody only\n", "no header fields"},
		{"missing boundary", "Message-ID: <m@x>\nContent-Type: multipart/mixed; boundary=b\n\nno parts here\n", "never appears"},
		{"bad base64", "Content-Transfer-Encoding: base64\n\n!!!not base64!!!\n", "base64"},
		{"bad part header", "Content-Type: multipart/mixed; boundary=b\n\n--b\nthis is : fine\nno colon line\n\nx\n--b--\n", "MIME part"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseMessage([]byte(tc.raw))
			var me *MalformedError
			if !errors.As(err, &me) {
				t.Fatalf("err = %v, want *MalformedError", err)
			}
			if !strings.Contains(me.Error(), tc.reason) {
				t.Errorf("err = %q, want it to mention %q", me, tc.reason)
			}
		})
	}
	big := make([]byte, 100)
	if _, err := ParseMessageLimit(big, 50); err == nil || !strings.Contains(err.Error(), "over the 50 byte cap") {
		t.Errorf("oversized: err = %v", err)
	}
}

// A Message-ID with a control character (a bracket-less one kept a bare
// CR, which went on into the reply's In-Reply-To) or of absurd length
// is no id: the mail gets a derived one, and such references are
// dropped.
func TestMessageIDsRefuseControlCharacters(t *testing.T) {
	long := strings.Repeat("x", MaxIDLength) + "@example.org"
	for _, id := range []string{"foo\r@example.org", "<foo\x00bar@example.org>", "<a\x1b[2J@example.org>", "<a\x7f@example.org>", long, "<" + long + ">"} {
		raw := "From: a@example.org\nSubject: [PATCH] x\nMessage-ID: " + id + "\nIn-Reply-To: " + id + "\nReferences: <ok@example.org> " + id + "\n\nbody\n"
		m, err := ParseMessage([]byte(raw))
		if err != nil {
			t.Fatalf("%q: %v", id, err)
		}
		if !m.DerivedID || m.InReplyTo != "" || len(m.References) != 1 || m.References[0] != "ok@example.org" {
			t.Errorf("%q: id %q (derived %v), in-reply-to %q, references %q", id, m.MessageID, m.DerivedID, m.InReplyTo, m.References)
		}
	}
	// Folding whitespace inside brackets is still dropped, and a plain
	// bare id still counts.
	m, err := ParseMessage([]byte("From: a@example.org\nMessage-ID: <fol\n ded@example.org>\nIn-Reply-To: bare@example.org\n\n"))
	if err != nil || m.MessageID != "folded@example.org" || m.DerivedID {
		t.Errorf("folded id: %q %v", m.MessageID, err)
	}
	m, err = ParseMessage([]byte("From: a@example.org\nMessage-ID: bare@example.org\n\n"))
	if err != nil || m.MessageID != "bare@example.org" {
		t.Errorf("bare id: %q %v", m.MessageID, err)
	}
}

// manyReferences is a reply whose References header holds n distinct
// ids reps times over, then its own id; In-Reply-To names the first.
func manyReferences(n, reps int) []byte {
	var b strings.Builder
	b.WriteString("From: a@example.org\nSubject: Re: [PATCH] x\nMessage-ID: <self@example.org>\nIn-Reply-To: <r0@example.org>\nReferences:")
	for range reps {
		for i := range n {
			fmt.Fprintf(&b, "\n <r%d@example.org>", i)
		}
	}
	b.WriteString(" <self@example.org>\n\nbody\n")
	return []byte(b.String())
}

// A References header of 160,000 ids keeps MaxReferences of them: the
// thread's root and the nearest ancestors, each once, never the mail's
// own id (parsing it took 22 s, each id looked for among those before).
func TestReferencesBounded(t *testing.T) {
	const n = 160000
	m, err := ParseMessage(manyReferences(n, 2))
	if err != nil {
		t.Fatal(err)
	}
	r := m.References
	if len(r) != MaxReferences || r[0] != "r0@example.org" || r[1] != fmt.Sprintf("r%d@example.org", n-MaxReferences+1) ||
		r[len(r)-1] != fmt.Sprintf("r%d@example.org", n-1) || m.InReplyTo != "r0@example.org" {
		t.Errorf("%d references, %q ... %q", len(r), r[:min(3, len(r))], r[max(0, len(r)-2):])
	}
	if cap(r) > 2*MaxReferences {
		t.Errorf("the references hold on to room for %d", cap(r))
	}
	m, err = ParseMessage(manyReferences(3, 2))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(m.References) != "[r0@example.org r1@example.org r2@example.org]" {
		t.Errorf("references %q", m.References)
	}
}

// BenchmarkManyReferences parses a mail whose References header holds
// 160,000 ids (22 s before the parse was bounded).
func BenchmarkManyReferences(b *testing.B) {
	raw := manyReferences(160000, 1)
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := ParseMessage(raw); err != nil {
			b.Fatal(err)
		}
	}
}
