package flow

import (
	"bytes"
	"encoding/json"
	"net/mail"
	"strings"
	"time"
)

// Message is one parsed mail. Every field is derived from Raw, which is
// kept byte for byte.
type Message struct {
	// MessageID is the first Message-ID, without the angle brackets.
	MessageID string
	// MessageIDs holds every Message-ID the mail carries (several
	// Message-ID headers, or several <ids> in one), first is MessageID.
	MessageIDs []string
	// DerivedID is set when the mail had no Message-ID and MessageID was
	// derived from its content the way public-inbox does.
	DerivedID bool
	// InReplyTo is the first id in In-Reply-To, or "".
	InReplyTo string
	// References lists the ids of References, oldest first, then any
	// In-Reply-To id not already there, without duplicates or the
	// message's own ids.
	References []string
	From       Address
	To, Cc     []Address
	// Date is the Date header; zero when absent or unparseable. It is
	// what the sender claims: Series clamps it against the arrival time.
	Date time.Time
	// ReceivedAt is the time in the topmost Received header (the last
	// hop, usually the list server or the archive), or zero.
	ReceivedAt time.Time
	// Subject is decoded (RFC 2047) and unfolded.
	Subject string
	// RawSubject is the Subject field as on the wire, folding included.
	RawSubject string
	// ListIDs are the List-Id values without the angle brackets.
	ListIDs []string
	// ReadFrom is the configured list whose inbox this copy was read
	// from ("" when unknown, as for an mbox): where the mail really is,
	// whatever its To and Cc say.
	ReadFrom string `json:"-"`
	// Body is the decoded text the patch tools see, as git mailinfo sees
	// it: the text parts of the mail (and attached .patch files) after
	// transfer decoding, CRLF line ends turned into LF as git mailsplit
	// does, the text before the patch converted from its charset to
	// UTF-8 and the patch itself left in the bytes of the files it
	// changes. Nothing else is normalised.
	Body string
	// Header is every header field in order, for anything not above.
	Header Header
	// Raw is the message as given.
	Raw []byte
}

// Parsed says the message was read by lore's parser: false for one only
// its raw bytes are known of (a series row an older bot stored).
func (m *Message) Parsed() bool { return m.Header != nil }

// UnmarshalJSON reads a message as stored, or the raw mail alone (a
// base64 string) as series rows an older bot wrote held it: that one is
// not Parsed until lore reads it again.
func (m *Message) UnmarshalJSON(data []byte) error {
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte(`"`)) {
		*m = Message{}
		return json.Unmarshal(data, &m.Raw)
	}
	type stored Message // without this method
	return json.Unmarshal(data, (*stored)(m))
}

// Address is one mailbox.
type Address struct {
	Name  string `json:"name,omitempty"` // decoded display name, may be ""
	Email string `json:"email"`          // addr-spec as written (case kept)
}

// String formats the address as "Name <email>".
func (a Address) String() string {
	if a.Name == "" {
		return a.Email
	}
	return (&mail.Address{Name: a.Name, Address: a.Email}).String()
}

// Field is one header field.
type Field struct {
	// Name is the field name as written (Message-Id, Message-ID ...).
	Name string
	// Raw is the value as on the wire after the colon, folding included,
	// without the final line break (CRLF read as LF).
	Raw string
}

// Value is the value unfolded (line breaks removed, RFC 5322 §2.2.3)
// and trimmed; encoded words are left as they are. It is computed on
// demand: list mail carries dozens of folded signature and routing
// fields nobody reads.
func (f Field) Value() string {
	raw := f.Raw
	if strings.IndexByte(raw, '\n') >= 0 {
		raw = strings.ReplaceAll(raw, "\n", "")
	}
	return strings.TrimSpace(raw)
}

// Header is the header of a message, fields in wire order.
type Header []Field

// Get returns the first value of the named field, case-insensitively,
// or "".
func (h Header) Get(name string) string {
	for _, f := range h {
		if strings.EqualFold(f.Name, name) {
			return f.Value()
		}
	}
	return ""
}

// Values returns every value of the named field in order.
func (h Header) Values(name string) []string {
	var vs []string
	for _, f := range h {
		if strings.EqualFold(f.Name, name) {
			vs = append(vs, f.Value())
		}
	}
	return vs
}

// Field returns the first named field and whether it exists.
func (h Header) Field(name string) (Field, bool) {
	for _, f := range h {
		if strings.EqualFold(f.Name, name) {
			return f, true
		}
	}
	return Field{}, false
}
