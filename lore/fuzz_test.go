package lore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
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
		_ = ParseSubject(m.Subject)
	})
}
