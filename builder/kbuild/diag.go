package kbuild

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Diagnostic is one compiler, linker or modpost error from a build log.
type Diagnostic struct {
	File    string // relative to the source tree; an object for linker errors
	Line    int    // 0 when the tool gives none
	Col     int
	Message string
	// Context is what the compiler printed under the line: the source
	// line and the caret under the culprit ("  342 |  ret = f(x);").
	Context string
}

func (d Diagnostic) String() string {
	switch {
	case d.File == "":
		return d.Message
	case d.Line == 0:
		return d.File + ": " + d.Message
	case d.Col == 0:
		return fmt.Sprintf("%s:%d: %s", d.File, d.Line, d.Message)
	default:
		return fmt.Sprintf("%s:%d:%d: %s", d.File, d.Line, d.Col, d.Message)
	}
}

func (d Diagnostic) key() string { return d.File + "\x00" + d.Message }

// maxDiagnostics bounds what is kept: the first errors are the ones that
// matter, later ones are mostly consequences.
const maxDiagnostics = 20

var (
	// gcc/clang: path:line:col: error: message (also "fatal error").
	ccErrorRE = regexp.MustCompile(`^(\S+?):(\d+):(?:(\d+):)? (?:fatal )?error: (.*)$`)
	// gcc/clang: path:line:col: warning: message.
	ccWarningRE = regexp.MustCompile(`^(\S+?):(\d+):(?:(\d+):)? warning: (.*)$`)
	// gcc's source excerpt under a diagnostic: "  342 | code", "      |   ^~~".
	ccContextRE = regexp.MustCompile(`^ +\d* \|`)
	// ld: "ld: obj: in function `f':" precedes
	// "file.c:(.text+0x..): undefined reference to `x'".
	ldFuncRE = regexp.MustCompile("^(?:\\S*/)?ld(?:\\.bfd)?: (\\S+): in function `([^']*)':$")
	ldRefRE  = regexp.MustCompile(`^(?:(?:\S*/)?ld(?:\.bfd)?: )?(\S+?):\(\S+\): (undefined reference to .*|multiple definition of .*)$`)
	ldErrRE  = regexp.MustCompile(`^(?:\S*/)?ld(?:\.bfd)?: (?:error: )?(.*(?:undefined reference|multiple definition|undefined symbol).*)$`)
	// modpost: ERROR: modpost: "sym" [drivers/x.ko] undefined!
	modpostRE = regexp.MustCompile(`^ERROR: modpost: (.*)$`)
	// make: *** No rule to make target 'x', needed by 'y'.  Stop.
	makeRuleRE = regexp.MustCompile(`^make(?:\[\d+\])?: \*\*\* (No rule to make target .*)$`)
)

// ParseLog reads a build log and returns its first errors and its first
// compiler warnings, each with the source excerpt the compiler printed
// under it, paths made relative to the source tree (srcPrefixes are
// stripped).
func ParseLog(r io.Reader, srcPrefixes ...string) (errs, warnings []Diagnostic) {
	seen := map[string]bool{}
	rel := func(p string) string {
		for _, pre := range srcPrefixes {
			if strings.HasPrefix(p, pre) {
				return strings.TrimPrefix(p[len(pre):], "/")
			}
		}
		for strings.HasPrefix(p, "../") {
			p = p[3:]
		}
		return strings.TrimPrefix(p, "./")
	}
	var ldObj, ldFunc string // from the last "in function" line
	var last *Diagnostic     // the diagnostic a context line belongs to
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() && len(errs) < maxDiagnostics {
		line := strings.TrimRight(sc.Text(), "\r")
		if ccContextRE.MatchString(line) {
			if last != nil {
				last.Context += line + "\n"
			}
			continue
		}
		last = nil
		var d Diagnostic
		if m := ccWarningRE.FindStringSubmatch(line); m != nil {
			if len(warnings) < maxDiagnostics {
				d := Diagnostic{File: rel(m[1]), Message: m[4]}
				d.Line, _ = strconv.Atoi(m[2])
				d.Col, _ = strconv.Atoi(m[3])
				k := fmt.Sprintf("%s:%d:%s", d.File, d.Line, d.Message)
				if !seen["w"+k] {
					seen["w"+k] = true
					warnings = append(warnings, d)
					last = &warnings[len(warnings)-1]
				}
			}
			continue
		}
		if m := ccErrorRE.FindStringSubmatch(line); m != nil {
			d.File = rel(m[1])
			d.Line, _ = strconv.Atoi(m[2])
			d.Col, _ = strconv.Atoi(m[3])
			d.Message = m[4]
		} else if m := ldFuncRE.FindStringSubmatch(line); m != nil {
			ldObj, ldFunc = rel(m[1]), m[2]
			continue
		} else if m := ldRefRE.FindStringSubmatch(line); m != nil {
			d.File, d.Message = rel(m[1]), m[2]
			if ldObj != "" {
				d.File, d.Message = ldObj, m[2]+" (in "+ldFunc+")"
				ldObj = ""
			}
		} else if m := ldErrRE.FindStringSubmatch(line); m != nil {
			d.Message = "ld: " + m[1]
		} else if m := modpostRE.FindStringSubmatch(line); m != nil {
			d.Message = "modpost: " + m[1]
		} else if m := makeRuleRE.FindStringSubmatch(line); m != nil {
			d.Message = "make: " + m[1]
		} else {
			continue
		}
		// The same error is printed again when a header is included twice.
		k := fmt.Sprintf("%s:%d:%s", d.File, d.Line, d.Message)
		if seen[k] {
			continue
		}
		seen[k] = true
		errs = append(errs, d)
		last = &errs[len(errs)-1]
	}
	return errs, warnings
}
