// Package smtptest runs a real SMTP server (go-smtp's) on 127.0.0.1 for
// tests: STARTTLS with a certificate made at start, and AUTH PLAIN when a
// user is set.
package smtptest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Options set what the server asks of clients.
type Options struct {
	// User and Password, when User is set, are required (AUTH PLAIN)
	// before MAIL FROM.
	User, Password string
}

// Message is one mail the server took.
type Message struct {
	From string
	To   []string
	TLS  bool
	Data []byte
}

// Server is a running SMTP server.
type Server struct {
	// Addr is host:port on 127.0.0.1.
	Addr string
	// ClientTLS trusts the server's certificate.
	ClientTLS *tls.Config

	opts    Options
	mu      sync.Mutex
	got     []Message
	dataErr error
}

// Start runs a server until the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	ms := &Server{ClientTLS: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}, opts: o}
	s := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{srv: ms, conn: c, authed: o.User == ""}, nil
	}))
	s.Domain = "127.0.0.1"
	s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	s.ReadTimeout, s.WriteTimeout = 10*time.Second, 10*time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ms.Addr = ln.Addr().String()
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return ms
}

// Messages returns what the server took so far, in order.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.got...)
}

// FailData makes the server answer the end of DATA with err (nil: accept).
func (s *Server) FailData(err error) {
	s.mu.Lock()
	s.dataErr = err
	s.mu.Unlock()
}

type session struct {
	srv    *Server
	conn   *smtp.Conn
	authed bool
	cur    Message
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, user, pass string) error {
		if s.srv.opts.User == "" || user != s.srv.opts.User || pass != s.srv.opts.Password {
			// What real servers answer (RFC 4954): permanent.
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "Authentication credentials invalid"}
		}
		s.authed = true
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if !s.authed {
		return smtp.ErrAuthRequired
	}
	s.cur = Message{From: from}
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.cur.To = append(s.cur.To, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	_, s.cur.TLS = s.conn.TLSConnectionState()
	s.cur.Data = b
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	if s.srv.dataErr != nil {
		return s.srv.dataErr
	}
	s.srv.got = append(s.srv.got, s.cur)
	return nil
}

func (s *session) Reset()        {}
func (s *session) Logout() error { return nil }
