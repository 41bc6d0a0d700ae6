package lore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func FuzzParseMessage(f *testing.F) {
	f.Add([]byte("From: a@b\nSubject: [PATCH] x\nMessage-ID: <x@y>\n\nbody\n"))
	f.Add([]byte("Subject: x\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\nContent-Transfer-Encoding: base64\n\naGk=\n--b--\n"))
	f.Add([]byte("Subject: =?UTF-8?B?w6k=?= =?ISO-8859-1?Q?=E9?=\nContent-Transfer-Encoding: quoted-printable\n\n=C3=A9=\n=ZZ\n"))
	f.Add([]byte("Message-ID:\n <folded@x>\nReferences: <a> <b>\n <a>\n\n"))
	// A few real messages make the corpus realistic when ../shared exists.
	if files, _ := filepath.Glob("../../shared/corpus/threads/*/0[0-2]-*.eml"); len(files) > 0 {
		for _, p := range files[:min(len(files), 6)] {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := ParseMessage(raw)
		if err != nil {
			var me *MalformedError
			if !errors.As(err, &me) || me.Reason == "" {
				t.Fatalf("error %v is not a *MalformedError with a reason", err)
			}
			return
		}
		if m.MessageID == "" || len(m.MessageIDs) == 0 || m.MessageIDs[0] != m.MessageID {
			t.Fatalf("no usable Message-ID: %q %q", m.MessageID, m.MessageIDs)
		}
		for _, r := range m.References {
			if r == m.MessageID {
				t.Fatalf("message references itself: %q", r)
			}
		}
		for _, id := range append(append([]string{m.InReplyTo}, m.MessageIDs...), m.References...) {
			if id != "" && !validID(id) {
				t.Fatalf("id %q has a control character, whitespace or brackets, or is too long", id)
			}
		}
		_ = ParseSubject(m.Subject)
	})
}

// FuzzAssemble feeds up to eight messages cut from the input (separated
// by NUL bytes) to an Assembler: whatever the threading (loops, self
// references, clashing indexes), assembly must not panic and must keep
// its invariants.
func FuzzAssemble(f *testing.F) {
	f.Add([]byte("Message-ID: <a>\nSubject: [PATCH 1/2] x\nIn-Reply-To: <b>\n\ndiff --git a/x b/x\n+++ b/x\n" +
		"\x00Message-ID: <b>\nSubject: [PATCH 2/2] y\nIn-Reply-To: <a>\nReferences: <a> <b>\n\ndiff --git a/y b/y\n" +
		"\x00Message-ID: <c>\nSubject: Re: [PATCH 2/2] y\nIn-Reply-To: <c>\n\nAcked-by: Me <me@example.org>\n#rdmabot test x y\n"))
	f.Add([]byte("Message-ID: <c0>\nSubject: [PATCH v2 0/3] z\n\ncover\x00Message-ID: <p>\nSubject: [PATCH v2 3/3] z\nReferences: <c0>\n\n---\n+++ b/f\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		a, err := NewAssembler(AssemblerConfig{Paths: []string{"**"}, GracePeriod: time.Hour, Now: func() time.Time { return time.Unix(2e9, 0) }})
		if err != nil {
			t.Fatal(err)
		}
		for i, raw := range bytes.SplitN(in, []byte{0}, 8) {
			_ = a.AddRaw(raw, time.Unix(int64(1e9+i), 0))
		}
		for _, s := range a.Assemble().Series {
			last := -1
			for _, p := range s.Patches {
				if p.Index <= last {
					t.Fatalf("patch indexes not strictly increasing in %+v", s)
				}
				last = p.Index
			}
			if s.Complete != (len(s.Missing) == 0) || s.Total < 1 {
				t.Fatalf("inconsistent series %+v", s)
			}
		}
	})
}
