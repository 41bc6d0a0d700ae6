// Package pitest starts a real public-inbox server for tests: one or more
// v2 inboxes built from .eml bytes with Debian's public-inbox (1.9), served
// by public-inbox-httpd and public-inbox-imapd on 127.0.0.1 ports the
// kernel picks. It is a faithful local lore.kernel.org: git epochs, Atom,
// /raw, /t.mbox.gz, manifest.js.gz, smart-HTTP git clone, and IMAP
// mailboxes <newsgroup>.0 with IDLE.
//
//	srv := pitest.Start(t, pitest.Inbox{Name: "linux-rdma", Messages: mails})
//	u := srv.InboxURL("linux-rdma")     // http://127.0.0.1:PORT/linux-rdma
//	srv.Add(t, "linux-rdma", oneMore)   // visible at once over HTTP and IMAP
//
// Everything lives in t.TempDir(): HOME, PI_CONFIG and PI_EMERGENCY point
// there, so the real ~/.public-inbox is never touched. The listening
// sockets are opened here and handed to the daemons (systemd-style
// LISTEN_FDS), so there is no port race and no 0.0.0.0 default. Stop (also
// run by t.Cleanup) sends SIGTERM to exactly the two daemon processes.
//
// Messages are imported through public-inbox's Perl API (the path
// public-inbox-mda ends in, about 70 times faster than one mda per
// message), in the order given: that order is the git commit order and
// the IMAP UID order, as arrival order is on lore.
//
// When public-inbox is not installed the test is skipped with a message
// naming the Debian package.
package pitest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Inbox describes one list the server carries.
type Inbox struct {
	// Name is the inbox name and URL path component (linux-rdma).
	Name string
	// Address is the list address; default <Name>@vger.kernel.org.
	Address string
	// Newsgroup names the NNTP group and IMAP mailbox prefix; default
	// org.kernel.vger.<Name>, as on lore.
	Newsgroup string
	// Messages are imported, in this order, before the daemons start.
	Messages [][]byte
	// SkipArtnum reserves the first article numbers (public-inbox-init
	// --skip-artnum): the first message gets SkipArtnum+1. IMAP slices
	// hold 50,000 numbers each, so 49,999 puts the second message in
	// <newsgroup>.1 without importing 50,000 messages.
	SkipArtnum int
	// RotateBytes, when set, makes public-inbox start a new git epoch once
	// the current one holds about this many bytes (its default is ~2.5
	// GB of mail), to test epoch rollover with a few messages.
	RotateBytes int
}

func (in *Inbox) fill() {
	if in.Address == "" {
		in.Address = in.Name + "@vger.kernel.org"
	}
	if in.Newsgroup == "" {
		in.Newsgroup = "org.kernel.vger." + in.Name
	}
}

// Server is a running public-inbox peer.
type Server struct {
	// Dir holds the config, the inboxes and the daemons' logs.
	Dir string
	// HTTPURL is the httpd base, http://127.0.0.1:PORT (no slash).
	HTTPURL string
	// IMAPAddr is the imapd address, 127.0.0.1:PORT (plain text, any
	// LOGIN is accepted).
	IMAPAddr string

	inboxes  map[string]Inbox
	env      []string
	mu       sync.Mutex // guards daemons; serialises imports
	daemons  []*daemon
	stopped  bool
	httpSock *os.File
	imapSock *os.File
}

// Start builds the inboxes and starts both daemons; it fails t on error.
func Start(t testing.TB, inboxes ...Inbox) *Server {
	t.Helper()
	for _, bin := range []string{"public-inbox-init", "public-inbox-httpd", "public-inbox-imapd", "perl", "git"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not found: the public-inbox peer needs Debian's public-inbox package (apt-get install public-inbox)", bin)
		}
	}
	if len(inboxes) == 0 {
		t.Fatal("pitest.Start: no inbox")
	}
	s := &Server{Dir: t.TempDir(), inboxes: map[string]Inbox{}}
	t.Cleanup(s.Stop)
	s.env = append(os.Environ(),
		"HOME="+filepath.Join(s.Dir, "home"),
		"PI_CONFIG="+filepath.Join(s.Dir, "config"),
		"PI_EMERGENCY="+filepath.Join(s.Dir, "emergency"),
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		// Keep fast-import's packs (git explodes small ones into loose
		// objects): public-inbox rotates epochs by packed size, and lore
		// serves packed repositories anyway.
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=fastimport.unpackLimit", "GIT_CONFIG_VALUE_0=0")
	for _, d := range []string{"home", "emergency", "run", "spool"} {
		if err := os.MkdirAll(filepath.Join(s.Dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	httpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	imapLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		httpLn.Close()
		t.Fatal(err)
	}
	s.HTTPURL = "http://" + httpLn.Addr().String()
	s.IMAPAddr = imapLn.Addr().String()

	for _, in := range inboxes {
		in.fill()
		if _, dup := s.inboxes[in.Name]; dup {
			t.Fatalf("pitest.Start: inbox %s twice", in.Name)
		}
		s.inboxes[in.Name] = in
		args := []string{"-V2", "--ng", in.Newsgroup, "-c", "listid=" + strings.Replace(in.Address, "@", ".", 1)}
		if in.SkipArtnum > 0 {
			args = append(args, "--skip-artnum="+strconv.Itoa(in.SkipArtnum))
		}
		args = append(args, in.Name, s.InboxDir(in.Name), s.InboxURL(in.Name), in.Address)
		if err := s.run("public-inbox-init", args...); err != nil {
			t.Fatal(err)
		}
		if err := s.importMessages(in.Name, "add", in.Messages); err != nil {
			t.Fatal(err)
		}
	}
	// mda (if a test uses it) would pipe every message through spamc.
	if err := s.run("git", "config", "-f", filepath.Join(s.Dir, "config"), "publicinboxmda.spamcheck", "none"); err != nil {
		t.Fatal(err)
	}

	// The server keeps the listening sockets open (as files handed to
	// each daemon it starts), so Restart reuses the ports.
	s.httpSock, err = httpLn.(*net.TCPListener).File()
	if err == nil {
		s.imapSock, err = imapLn.(*net.TCPListener).File()
	}
	httpLn.Close()
	imapLn.Close()
	if err == nil {
		err = s.startDaemons()
	}
	if err != nil {
		s.Stop()
		t.Fatalf("pitest: %v\n%s", err, s.logs())
	}
	return s
}

// InboxURL is the inbox's HTTP base, http://127.0.0.1:PORT/<name>.
func (s *Server) InboxURL(name string) string { return s.HTTPURL + "/" + name }

// InboxDir is the inbox on disk (git/0.git, msgmap.sqlite3, ...): a local
// public-inbox archive in exactly lore's layout.
func (s *Server) InboxDir(name string) string { return filepath.Join(s.Dir, "inboxes", name) }

// Mailbox is the inbox's first IMAP mailbox, <newsgroup>.0 (UIDs 1 to
// 50,000; <newsgroup>.K holds the K-th next 50,000).
func (s *Server) Mailbox(name string) string { return s.inboxes[name].Newsgroup + ".0" }

// Add imports one more message into a running inbox; it is visible over
// HTTP and IMAP when Add returns. A duplicate is an error.
func (s *Server) Add(t testing.TB, name string, raw []byte) {
	t.Helper()
	if err := s.importMessages(name, "add", [][]byte{raw}); err != nil {
		t.Fatal(err)
	}
}

// Remove deletes a message the way public-inbox-learn rm does: a new
// commit whose tree holds the message as blob `d`.
func (s *Server) Remove(t testing.TB, name string, raw []byte) {
	t.Helper()
	if err := s.importMessages(name, "remove", [][]byte{raw}); err != nil {
		t.Fatal(err)
	}
}

// Purge erases a message from the inbox and its git history with
// public-inbox-purge: every later commit of the epoch is rewritten, so
// mirrors see a non-fast-forward history, as lore's do after a purge.
func (s *Server) Purge(t testing.TB, name string, raw []byte) {
	t.Helper()
	if _, ok := s.inboxes[name]; !ok {
		t.Fatalf("%v: %q", ErrNoInbox, name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.runInput(raw, "public-inbox-purge", s.InboxDir(name)); err != nil {
		t.Fatal(err)
	}
}

// importScript adds or removes the files given as arguments, in order,
// in one transaction of the inbox's V2Writable.
const importScript = `
use strict; use warnings;
use PublicInbox::Config; use PublicInbox::InboxWritable; use PublicInbox::Eml;
my ($name, $op, $rotate) = (shift @ARGV, shift @ARGV, shift @ARGV);
my $ibx = PublicInbox::Config->new->lookup_name($name) or die "no inbox $name\n";
my $im = PublicInbox::InboxWritable->new($ibx)->importer(0);
# V2Writable's epoch size (internal, as public-inbox's own tests set it)
$im->{rotate_bytes} = $rotate if $rotate > 0;
my $bad = 0;
for my $f (@ARGV) {
	open(my $fh, '<', $f) or die "$f: $!\n";
	my $raw = do { local $/; <$fh> };
	my $eml = PublicInbox::Eml->new(\$raw);
	my $ok = $op eq 'add' ? $im->add($eml) : $im->remove($eml, 'rm');
	unless ($ok) { warn "public-inbox refused ($op) $f\n"; $bad++ }
}
$im->done;
exit($bad ? 1 : 0);
`

func (s *Server) importMessages(name, op string, msgs [][]byte) error {
	if _, ok := s.inboxes[name]; !ok {
		return fmt.Errorf("%w: %q", ErrNoInbox, name)
	}
	if len(msgs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dir, err := os.MkdirTemp(filepath.Join(s.Dir, "spool"), op)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	args := []string{"-e", importScript, name, op, strconv.Itoa(s.inboxes[name].RotateBytes)}
	for i, m := range msgs {
		p := filepath.Join(dir, fmt.Sprintf("%06d.eml", i))
		if err := os.WriteFile(p, m, 0o644); err != nil {
			return err
		}
		args = append(args, p)
	}
	return s.run("perl", args...)
}

func (s *Server) run(name string, args ...string) error {
	return s.runInput(nil, name, args...)
}

func (s *Server) runInput(stdin []byte, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Env = s.env
	cmd.Dir = s.Dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		if name == "perl" {
			args = args[2:] // not the script
		}
		return fmt.Errorf("pitest: %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// startDaemons starts httpd and imapd and waits until both answer.
func (s *Server) startDaemons() error {
	if err := s.startDaemon("httpd", s.HTTPURL, s.httpSock); err != nil {
		return err
	}
	if err := s.startDaemon("imapd", "imap://"+s.IMAPAddr, s.imapSock); err != nil {
		return err
	}
	return s.waitReady()
}

// startDaemon runs one public-inbox daemon on an inherited listener.
// LISTEN_PID must be the daemon's own pid: sh sets it to $$ and then
// execs the daemon, which keeps that pid.
func (s *Server) startDaemon(name, listen string, f *os.File) error {
	logf, err := os.OpenFile(filepath.Join(s.Dir, "run", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command("sh", "-c", `LISTEN_PID=$$ exec "$@"`, "sh",
		"public-inbox-"+name, "-W0", "-l", listen)
	cmd.Env = append(s.env, "LISTEN_FDS=1")
	cmd.ExtraFiles = []*os.File{f} // fd 3, as systemd passes it
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = s.Dir
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start public-inbox-%s: %w", name, err)
	}
	d := &daemon{name: "public-inbox-" + name, cmd: cmd, done: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		close(d.done)
	}()
	s.mu.Lock()
	s.daemons = append(s.daemons, d)
	s.mu.Unlock()
	return nil
}

// daemon is one running public-inbox daemon; done closes when it exits.
type daemon struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// waitReady waits until httpd answers a request and imapd greets.
func (s *Server) waitReady() error {
	deadline := time.Now().Add(60 * time.Second)
	client := &http.Client{Timeout: 5 * time.Second}
	for {
		httpErr := func() error {
			resp, err := client.Get(s.HTTPURL + "/manifest.js.gz")
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("manifest: %s", resp.Status)
			}
			return nil
		}()
		imapErr := func() error {
			c, err := net.DialTimeout("tcp", s.IMAPAddr, 5*time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			greet, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				return err
			}
			if !strings.HasPrefix(greet, "* OK") {
				return fmt.Errorf("imap greeting %q", greet)
			}
			return nil
		}()
		if httpErr == nil && imapErr == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("daemons not ready after 60s: http: %v; imap: %v", httpErr, imapErr)
		}
		if err := s.exited(); err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// exited reports a daemon that is already gone.
func (s *Server) exited() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.daemons {
		select {
		case <-d.done:
			return fmt.Errorf("%s exited: %v", d.name, d.err)
		default:
		}
	}
	return nil
}

func (s *Server) logs() string {
	var b strings.Builder
	for _, n := range []string{"httpd", "imapd"} {
		out, _ := os.ReadFile(filepath.Join(s.Dir, "run", n+".log"))
		fmt.Fprintf(&b, "--- public-inbox-%s log:\n%s", n, out)
	}
	return b.String()
}

// Stop terminates the daemons (SIGTERM, then SIGKILL after 10 s) and
// waits for them. It is safe to call more than once.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.stopped = true
	s.terminate(syscall.SIGTERM)
	for _, f := range []*os.File{s.httpSock, s.imapSock} {
		if f != nil {
			f.Close()
		}
	}
}

// Restart kills both daemons, as a crash would, which drops every client
// connection (an IMAP IDLE included), and starts them again on the same
// ports. New connections made meanwhile wait in the socket's backlog.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		t.Fatal("pitest: Restart after Stop")
	}
	s.terminate(syscall.SIGKILL)
	s.daemons = nil
	s.mu.Unlock()
	if err := s.startDaemons(); err != nil {
		t.Fatalf("pitest: restart: %v\n%s", err, s.logs())
	}
}

// terminate signals the running daemons and waits for them, killing
// those still there after 10 s (a graceful imapd waits for its IDLE
// clients); s.mu is held.
func (s *Server) terminate(sig syscall.Signal) {
	for _, d := range s.daemons {
		d.cmd.Process.Signal(sig)
	}
	for _, d := range s.daemons {
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			d.cmd.Process.Kill()
			<-d.done
		}
	}
}

// ErrNoInbox is returned for an inbox name the server does not carry.
var ErrNoInbox = errors.New("pitest: no such inbox")
