// Package lore reads the mail of the linux-rdma and linux-nfs lists,
// assembles patch series and keeps those that touch the paths the bot
// tests. It is the first stage of the pipeline: bot feeds it the items
// of lore/feed's sources and hands the series it finds to builder.
//
// Its parts, each usable alone:
//
//   - ParseMessage turns raw RFC 5322 bytes into a Message: ids (several,
//     folded, or derived from the content when missing), threading,
//     addresses, dates, the decoded Subject and the Body that git am
//     would see (MIME parts, quoted-printable, base64, charsets, CRLF).
//     Bad mail gives a *MalformedError with the reason, never a panic.
//   - ParseSubject reads "[PATCH rdma-next v2 03/12] title": PATCH, RFC,
//     RESEND, tree tags anywhere, vN, n/m, Re:/Fw:, and the Title that
//     git am commits.
//   - An Assembler collects messages in any order and Assemble groups
//     them into Series (one per posted version: cover or none, patches
//     by index, what is missing, b4-style follow-up trailers, applied
//     notes, base-commit and change-id, matched paths, links between
//     versions) and the Commands addressed to the bot in replies.
//   - DKIM.Authenticate checks that a command's mail comes from its
//     From: (a DKIM signature of that domain or a parent that verifies),
//     looking the signers' keys up with the resolver it is given.
//
// The result depends only on the set of messages held, never on their
// order (of two copies of one Message-ID the first is kept), so a
// restart that re-reads the archive finds the same series with the same
// IDs. Typical use with lore/feed:
//
//	a, err := lore.NewAssembler(cfg.Lore.Assembler(clock.Now))
//	...
//	consume := func(ctx context.Context, it feed.Item) error {
//		var err error
//		if it.Deleted {
//			err = a.ForgetRaw(it.Raw)
//		} else {
//			err = a.AddRaw(it.Raw, it.Received)
//		}
//		if err != nil {
//			return feed.Skip(err) // the mail's fault: log, go on
//		}
//		return nil
//	}
//	... after a poll:
//	for _, s := range a.Assemble().Series {
//		if s.Relevant() && s.Complete { /* test it */ }
//		if s.Incomplete != "" { /* report what is missing */ }
//	}
//
// An Assembler is not safe for concurrent use. It holds what it was
// given: serve builds one per poll from the window of stored mail, and a
// long scan bounds its memory with Flush.
package lore
