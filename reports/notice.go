package reports

import (
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/flow"
)

// Notice is an answer that is not a test verdict.
type Notice struct {
	// Outcome is Incomplete or Refused.
	Outcome flow.Outcome
	// Thread is the series the notice is about.
	Thread Thread
	// To is who is answered: the series' author for Incomplete, the
	// command's sender for Refused.
	To Address
	// InReplyTo and References place the answer: the message answered
	// (the command mail) and its own References; empty: the series'
	// root, as verdicts are placed.
	InReplyTo  string
	References []string
	// Text is the notice, one paragraph per line; Quote is the line
	// answered, shown first ("> #rdmabot test foo").
	Text, Quote string
}

// RenderNotice writes a notice as an in-thread email with the bot's
// signature: an incomplete series' Cc whom the series was sent to (its
// lists and people, no maintainer), a refusal to the command's sender
// alone.
func RenderNotice(c *Config, n *Notice, msgID string, now time.Time) (*Mail, error) {
	if n.Outcome != flow.Incomplete && n.Outcome != flow.Refused {
		return nil, fmt.Errorf("%v is not a notice", n.Outcome)
	}
	t := n.Thread
	if t.MessageID == "" || n.To.Email == "" {
		return nil, fmt.Errorf("notice has no Message-ID or person to answer")
	}
	m := &Mail{
		MessageID: msgID,
		From:      c.From,
		To:        []string{(&mail.Address{Name: n.To.Name, Address: n.To.Email}).String()},
		Subject:   replySubject(t.Subject),
		InReplyTo: t.MessageID,
		Date:      now,
		Outcome:   n.Outcome,
	}
	m.References = append(append([]string{}, t.References...), t.MessageID)
	if n.InReplyTo != "" {
		m.InReplyTo = n.InReplyTo
		m.References = append(append([]string{}, n.References...), n.InReplyTo)
	}
	if n.Outcome == flow.Incomplete {
		// A refusal answers whoever sent the command, often a stranger:
		// on a list it would spend the list's daily replies.
		cc, err := listCc(c, append(append([]string{}, t.Lists...), t.Addressed...), n.To.Email)
		if err != nil {
			return nil, err
		}
		m.Cc = append(m.Cc, cc...)
	}
	var b strings.Builder
	if name := firstName(n.To); name != "" {
		b.WriteString("Hi " + name + ",\n\n")
	} else {
		b.WriteString("Hello,\n\n")
	}
	if n.Quote != "" {
		b.WriteString("> " + oneLine(n.Quote, MaxSubject) + "\n\n")
	}
	for _, p := range strings.Split(strings.TrimSpace(n.Text), "\n") {
		if p = strings.TrimSpace(p); p != "" {
			b.WriteString(wrap(p, 72) + "\n\n")
		}
	}
	b.WriteString(signature(c))
	m.Body = b.String()
	return m, nil
}
