package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/rdmabot/rdmabot/builder"
	"github.com/rdmabot/rdmabot/builder/kbuild"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/reports"
)

// buildStage is the builder with the source's failures told in the
// reply's terms: a patch that does not apply and where, a kernel that
// does not build and the compiler's diagnostics (reports.Failure).
type buildStage struct{ *builder.Stage }

func (b buildStage) Apply(ctx context.Context, base flow.Base, s flow.Series, trace io.Writer) (string, error) {
	commit, err := b.Stage.Apply(ctx, base, s, trace)
	return commit, applyFailure(err)
}

func (b buildStage) Build(ctx context.Context, tree, commit string, trace io.Writer) (string, error) {
	dir, err := b.Stage.Build(ctx, tree, commit, trace)
	return dir, buildFailure(err)
}

func (b buildStage) Check(ctx context.Context, tree, base, candidate string, trace io.Writer) (flow.Checked, error) {
	compiled, unchanged, err := b.Stage.Check(ctx, tree, base, candidate, trace)
	c := flow.Checked{Compiled: compiled, Unchanged: unchanged}
	if unchanged {
		// Plain strings: the marshal cannot fail.
		c.Detail, _ = json.Marshal(reports.Detail{Unchanged: &reports.UnchangedCode{Objects: compiled}})
	}
	return c, buildFailure(err)
}

// applyFailure keeps a patch that does not apply, or that the builder
// refuses, structured for the reply; other errors pass unchanged.
func applyFailure(err error) error {
	var ae *builder.ApplyError
	var ue *builder.UnsafeError
	switch {
	case errors.As(err, &ae):
		a := &reports.ApplyFailure{Patch: ae.Subject, Index: ae.Index, File: ae.File,
			Output: fmt.Sprintf("patch %d/%d: %s", ae.Index, ae.Total, ae.Reason)}
		if ae.Hunk > 0 {
			a.Hunk = fmt.Sprintf("#%d %s", ae.Hunk, ae.HunkHeader)
		}
		return &reports.Failure{Err: err, Account: reports.Detail{Apply: a}}
	case errors.As(err, &ue):
		return &reports.Failure{Err: err, Account: reports.Detail{Apply: &reports.ApplyFailure{Patch: ue.Subject, Index: ue.Index, File: ue.File,
			Output: fmt.Sprintf("patch %d/%d refused: %s", ue.Index, ue.Total, ue.Reason)}}}
	}
	return err
}

// buildFailure keeps a kernel that does not build structured for the
// reply: every error and warning with the compiler's source excerpt.
func buildFailure(err error) error {
	var ce *kbuild.ConfigError
	if errors.As(err, &ce) {
		f := &reports.BuildFailure{Target: "olddefconfig"}
		for _, l := range ce.Lost {
			f.New = append(f.New, reports.Diagnostic{Text: "config option lost: " + l.String()})
		}
		return &reports.Failure{Err: err, Account: reports.Detail{Build: f}}
	}
	var be *kbuild.BuildError
	if !errors.As(err, &be) {
		return err
	}
	diags := func(ds []kbuild.Diagnostic, kind string) []reports.Diagnostic {
		var out []reports.Diagnostic
		for _, d := range ds {
			text := d.String()
			if d.File != "" && d.Line > 0 {
				text = strings.Replace(text, ": "+d.Message, ": "+kind+": "+d.Message, 1)
			}
			out = append(out, reports.Diagnostic{Text: text, Context: d.Context})
		}
		return out
	}
	f := &reports.BuildFailure{Target: be.Target, New: diags(be.Diagnostics, "error"), Warnings: diags(be.Warnings, "warning")}
	if len(f.New) == 0 {
		// No error line recognised (a Makefile or script): the log's end.
		f.New = []reports.Diagnostic{{Text: "make " + be.Target + " failed; the end of its log:", Context: excerptTail(be.Tail, 20)}}
	}
	return &reports.Failure{Err: err, Account: reports.Detail{Build: f}}
}

func excerptTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
