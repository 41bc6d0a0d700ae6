package smtptest

import (
	"errors"
	"net/smtp"
	"strings"
	"testing"
)

// send is a client as the mailer is one: STARTTLS, then AUTH PLAIN when
// a user is given, then one message.
func send(t *testing.T, s *Server, user, pass string) error {
	t.Helper()
	c, err := smtp.Dial(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.StartTLS(s.ClientTLS); err != nil {
		return err
	}
	if user != "" {
		if err := c.Auth(smtp.PlainAuth("", user, pass, "127.0.0.1")); err != nil {
			return err
		}
	}
	if err := c.Mail("bot@example.org"); err != nil {
		return err
	}
	for _, to := range []string{"a@example.org", "list@example.org"} {
		if err := c.Rcpt(to); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte("Subject: hi\r\n\r\nbody\r\n")); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

func TestServerTakesMail(t *testing.T) {
	s := Start(t, Options{})
	if err := send(t, s, "", ""); err != nil {
		t.Fatal(err)
	}
	got := s.Messages()
	if len(got) != 1 || got[0].From != "bot@example.org" || strings.Join(got[0].To, ",") != "a@example.org,list@example.org" ||
		!got[0].TLS || !strings.Contains(string(got[0].Data), "Subject: hi") {
		t.Fatalf("took %+v", got)
	}
}

func TestServerAuth(t *testing.T) {
	s := Start(t, Options{User: "bot", Password: "secret"})
	if err := send(t, s, "", ""); err == nil || !strings.Contains(err.Error(), "authenticate") {
		t.Fatalf("mail without AUTH: %v, want refused", err)
	}
	if err := send(t, s, "bot", "wrong"); err == nil || !strings.HasPrefix(err.Error(), "535") {
		t.Fatalf("wrong password: %v, want 535", err)
	}
	if err := send(t, s, "bot", "secret"); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Messages()); n != 1 {
		t.Fatalf("%d messages, want 1", n)
	}
}

func TestServerFailData(t *testing.T) {
	s := Start(t, Options{})
	s.FailData(errors.New("451 try later"))
	if err := send(t, s, "", ""); err == nil {
		t.Fatal("DATA accepted while failing")
	}
	s.FailData(nil)
	if err := send(t, s, "", ""); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Messages()); n != 1 {
		t.Fatalf("%d messages, want the one accepted", n)
	}
}
