package outbox

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// SMTP submits mail to a server with STARTTLS and AUTH PLAIN.
type SMTP struct {
	Addr string
	// StartTLS is required unless the server is on loopback.
	StartTLS  bool
	TLSConfig *tls.Config
	User      string
	Password  string
	// From is the envelope sender.
	From    string
	Timeout time.Duration
}

// Send submits e.Raw to e.Envelope. Everything before the server's
// answer to the end of DATA is provably undelivered; a 5xx answer is a
// rejection; a lost connection after DATA leaves the fate unknown.
func (s *SMTP) Send(ctx context.Context, e *Entry) error {
	if len(e.Envelope) == 0 {
		return &Rejected{Err: errors.New("no recipients")}
	}
	if !s.StartTLS && !loopback(s.Addr) {
		return &Rejected{Err: fmt.Errorf("refusing plaintext SMTP to %s (not loopback)", s.Addr)}
	}
	d := net.Dialer{Timeout: s.Timeout}
	conn, err := d.DialContext(ctx, "tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("smtp dial %s: %w: %w", s.Addr, ErrNotDelivered, err)
	}
	// Cancelling ctx closes the connection, ending any blocked command.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	before := func(step string, err error) error {
		var se *smtp.SMTPError
		if errors.As(err, &se) && se.Code >= 500 {
			return &Rejected{Err: fmt.Errorf("smtp %s: %w", step, err)}
		}
		return fmt.Errorf("smtp %s: %w: %w", step, ErrNotDelivered, err)
	}
	var c *smtp.Client
	if s.StartTLS {
		// The greeting and STARTTLS run before CommandTimeout can be
		// set: bound them with a timer that closes the connection.
		t := time.AfterFunc(s.Timeout, func() { conn.Close() })
		c, err = smtp.NewClientStartTLS(conn, s.TLSConfig)
		t.Stop()
		if err != nil {
			return before("starttls", err)
		}
	} else {
		c = smtp.NewClient(conn)
	}
	defer c.Close()
	c.CommandTimeout, c.SubmissionTimeout = s.Timeout, s.Timeout
	if s.User != "" {
		if err := c.Auth(sasl.NewPlainClient("", s.User, s.Password)); err != nil {
			return before("auth", err)
		}
	}
	if err := c.Mail(s.From, nil); err != nil {
		return before("mail from", err)
	}
	for _, r := range e.Envelope {
		if err := c.Rcpt(r, nil); err != nil {
			return before("rcpt to "+r, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return before("data", err)
	}
	if _, err := w.Write(e.Raw); err != nil {
		return before("data", err)
	}
	if err := w.Close(); err != nil {
		var se *smtp.SMTPError
		if errors.As(err, &se) {
			if se.Code >= 500 {
				return &Rejected{Err: fmt.Errorf("smtp end of data: %w", err)}
			}
			return fmt.Errorf("smtp end of data: %w: %w", ErrNotDelivered, err)
		}
		return fmt.Errorf("smtp end of data: %w", err) // fate unknown
	}
	_ = c.Quit() // delivered; a failed QUIT changes nothing
	return nil
}

func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}
