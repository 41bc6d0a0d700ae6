// Package bundle makes a test's reproducer: the files to redo one of
// rdmabot's comparisons on another Debian machine with no rdmabot server
// and no database. The series as an mbox, the base (tree URL, branch,
// commit), the kernel .config the bot built, the lab's and the
// statistics' settings, the rdmabot binary (whose offline commands apply,
// build, make the guest image and boot the pair), and run.sh, the one
// command that builds both kernels and prints the verdict as the reply
// words it.
package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
	"time"
)

// Input is what a reproducer is made of.
type Input struct {
	TestID  int64
	Subject string
	Link    string // the series on the archive
	// Tree is the bot's name of the base tree; TreeURL where to fetch it
	// ("" for an imported tree: the reader gives LINUX); Branch the
	// branch the base is on ("" if unknown).
	Tree, TreeURL, Branch string
	Base                  string // the base commit
	Patches               [][]byte
	// Config is the base kernel's .config as the bot built it; nil when
	// the artifact is no longer kept.
	Config []byte
	// ConfigPath, when Config is nil, is where that .config is: read
	// when the bundle is written, not when it is made.
	ConfigPath string
	// Settings is the lab's and the statistics' configuration (TOML,
	// with no cache_dir or data_dir: run.sh puts its own first).
	Settings []byte
	// Binary is the rdmabot executable to include ("": none, run.sh then
	// needs RDMABOT); Version names it.
	Binary, Version string
	// Kept is what the bot kept of its own run, to compare with: the
	// build logs, every boot's figures. run.sh does not read them.
	Kept []File
	// Lossy says the bot booted the kernels over the lossy link first
	// (lab.lossy), ClientSide the patched kernel on the client beside the
	// base on the server (lab.client_side), Pressure under Send Queue
	// pressure (lab.pressure): run.sh does too.
	Lossy, ClientSide, Pressure bool
	// Guest are the scripts each guest runs (lab.GuestScripts), for a
	// reader who boots the kernels without rdmabot: named guest-<name>.
	Guest []File
	// Side is where the bot booted the patched kernel beside the base:
	// "client" for a series changing client code alone (the server takes
	// the times), else the server. run.sh does the same.
	Side string
	// QEMUBase and QEMUCandidate are the guests' QEMU command lines of a
	// base boot and of a patched one (lab.CommandLines), server first,
	// for a reader who boots without rdmabot.
	QEMUBase, QEMUCandidate []string
}

// File is one file of a bundle: its bytes, or a path to copy.
type File struct {
	Name string
	Mode os.FileMode
	Data []byte
	Path string
}

// Bundle is a reproducer's files, under one directory name.
type Bundle struct {
	Dir   string
	Files []File
}

// Make assembles the bundle of in.
func Make(in Input) (*Bundle, error) {
	if in.Base == "" {
		return nil, fmt.Errorf("bundle: test %d has no base commit", in.TestID)
	}
	if !hexSHA.MatchString(in.Base) {
		return nil, fmt.Errorf("bundle: test %d: base %q is not a commit id", in.TestID, in.Base)
	}
	// The subject goes into a comment line of run.sh: one line.
	in.Subject = strings.Join(strings.Fields(in.Subject), " ")
	if len(in.Patches) == 0 {
		return nil, fmt.Errorf("bundle: test %d has no patches", in.TestID)
	}
	var script, readme bytes.Buffer
	data := struct {
		Input
		Patches int
		Quote   func(string) string
	}{in, len(in.Patches), shellQuote}
	if err := runTmpl.Execute(&script, data); err != nil {
		return nil, err
	}
	if err := readmeTmpl.Execute(&readme, data); err != nil {
		return nil, err
	}
	b := &Bundle{Dir: fmt.Sprintf("rdmabot-test-%d", in.TestID)}
	b.Files = append(b.Files,
		File{Name: "README", Mode: 0o644, Data: readme.Bytes()},
		File{Name: "run.sh", Mode: 0o755, Data: script.Bytes()},
		File{Name: "series.mbox", Mode: 0o644, Data: Mbox(in.Patches)},
		File{Name: "lab.toml", Mode: 0o644, Data: in.Settings})
	if in.Config != nil {
		b.Files = append(b.Files, File{Name: "kernel.config", Mode: 0o644, Data: in.Config})
	} else if in.ConfigPath != "" {
		b.Files = append(b.Files, File{Name: "kernel.config", Mode: 0o644, Path: in.ConfigPath})
	}
	for _, f := range in.Guest {
		f.Name = "guest-" + f.Name
		b.Files = append(b.Files, f)
	}
	b.Files = append(b.Files, in.Kept...)
	if in.Binary != "" {
		b.Files = append(b.Files, File{Name: "rdmabot", Mode: 0o755, Path: in.Binary})
	}
	return b, nil
}

// Mbox is messages in mboxrd form, as lore's t.mbox.gz and git am read
// it: a From line before each, body lines that start with >*From quoted
// once more.
func Mbox(msgs [][]byte) []byte {
	var b bytes.Buffer
	for _, m := range msgs {
		b.WriteString("From mboxrd@z Thu Jan  1 00:00:00 1970\n")
		m = bytes.ReplaceAll(m, []byte("\r\n"), []byte("\n"))
		for _, l := range strings.SplitAfter(string(m), "\n") {
			if strings.HasPrefix(strings.TrimLeft(l, ">"), "From ") {
				b.WriteByte('>')
			}
			b.WriteString(l)
		}
		if !bytes.HasSuffix(m, []byte("\n")) {
			b.WriteByte('\n')
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// WriteDir writes the bundle into parent/Dir and returns that path.
func (b *Bundle) WriteDir(parent string) (string, error) {
	dir := filepath.Join(parent, b.Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, f := range b.Files {
		if err := b.writeFile(filepath.Join(dir, f.Name), f); err != nil {
			return "", err
		}
	}
	return dir, nil
}

func (b *Bundle) writeFile(path string, f File) error {
	out, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, f.Mode)
	if err != nil {
		return err
	}
	if err := copyFile(out, f); err != nil {
		out.Close()
		return fmt.Errorf("bundle: %s: %w", f.Name, err)
	}
	return out.Close()
}

func copyFile(w io.Writer, f File) error {
	if f.Path == "" {
		_, err := w.Write(f.Data)
		return err
	}
	in, err := os.Open(f.Path)
	if err != nil {
		return err
	}
	defer in.Close()
	_, err = io.Copy(w, in)
	return err
}

// WriteTarGz writes the bundle as a gzipped tar of Dir, dated now.
func (b *Bundle) WriteTarGz(w io.Writer, now time.Time) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: b.Dir + "/", Mode: 0o755, ModTime: now}); err != nil {
		return err
	}
	for _, f := range b.Files {
		size := int64(len(f.Data))
		if f.Path != "" {
			st, err := os.Stat(f.Path)
			if err != nil {
				return fmt.Errorf("bundle: %s: %w", f.Name, err)
			}
			size = st.Size()
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: b.Dir + "/" + f.Name, Mode: int64(f.Mode), Size: size, ModTime: now}); err != nil {
			return err
		}
		if err := copyFile(tw, f); err != nil {
			return fmt.Errorf("bundle: %s: %w", f.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

var hexSHA = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// shellQuote makes s one word for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var runTmpl = template.Must(template.New("run.sh").Parse(`#!/bin/sh
# Redoes rdmabot test {{.TestID}} without rdmabot's server or database:
#   {{.Subject}}
# builds the base and the patched kernel and boots them alternately on
# two QEMU guests until the statistics decide, as the bot did. See README.
#
#   LINUX    a git repository holding the base commit (default: ./linux.git,
#            fetched from the tree's URL when it lacks the commit)
#   CACHE    ccache, kernel builds, guest image (default: ./work/cache)
#   RDMABOT  the rdmabot binary (default: ./rdmabot, the bot's own)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
RDMABOT=${RDMABOT:-$here/rdmabot}
LINUX=${LINUX:-$here/linux.git}
CACHE=${CACHE:-$here/work/cache}
work=$here/work
tree={{call .Quote .Tree}}
tree_url={{call .Quote .TreeURL}}
branch={{call .Quote .Branch}}
base={{.Base}}

mkdir -p "$work" "$CACHE"
if ! git --git-dir="$LINUX" cat-file -e "$base^{commit}" 2>/dev/null; then
	if [ -z "$tree_url" ]; then
		echo "run.sh: the base tree ($tree) was imported, not fetched: set LINUX to a git repository holding $base" >&2
		exit 2
	fi
	echo "run.sh: fetching $base from $tree_url into $LINUX" >&2
	[ -d "$LINUX" ] || git init -q --bare "$LINUX"
	git --git-dir="$LINUX" fetch --depth=1 "$tree_url" "$base" ||
		git --git-dir="$LINUX" fetch "$tree_url" "${branch:-HEAD}"
fi
{
	printf 'cache_dir = "%s"\ndata_dir = "%s"\n\n' "$CACHE" "$work/data"
	cat "$here/lab.toml"
} >"$work/rdmabot.toml"
cfg=$work/rdmabot.toml

echo "run.sh: applying the series ({{.Patches}} patches) to $base as git am would" >&2
"$RDMABOT" apply --config "$cfg" --repo "$LINUX" --base "$base" --mbox "$here/series.mbox" --ref refs/rdmabot-reproduce/{{.TestID}}
echo "run.sh: building the base kernel" >&2
"$RDMABOT" build --config "$cfg" --repo "$LINUX" --rev "$base" --slot reproduce --out "$work/base"
echo "run.sh: building the patched kernel" >&2
"$RDMABOT" build --config "$cfg" --repo "$LINUX" --rev refs/rdmabot-reproduce/{{.TestID}} --slot reproduce --out "$work/candidate"
if [ -f "$here/kernel.config" ] && ! cmp -s "$here/kernel.config" "$work/base/config"; then
	echo "run.sh: note: the base .config differs from the bot's (kernel.config), e.g. another compiler:" >&2
	diff "$here/kernel.config" "$work/base/config" | head -20 >&2 || true
fi
echo "run.sh: guest image" >&2
"$RDMABOT" lab image --config "$cfg" >&2
exec "$RDMABOT" lab compare --config "$cfg" --base "$work/base" --candidate "$work/candidate"{{if .Lossy}} --lossy{{end}}{{if .ClientSide}} --client-side{{end}}{{if .Pressure}} --pressure{{end}}{{if eq .Side "client"}} --side client{{end}}
`))

var readmeTmpl = template.Must(template.New("README").Parse(`rdmabot test {{.TestID}}: a reproducer
{{if .Link}}
Series:  {{.Subject}}
         {{.Link}}
{{else}}
Series:  {{.Subject}}
{{end}}Base:    {{.Base}}{{if .Tree}} ({{.Tree}}{{if .Branch}}, branch {{.Branch}}{{end}}{{if .TreeURL}}, {{.TreeURL}}{{end}}){{end}}
{{if .Version}}rdmabot: {{.Version}}
{{end}}
To redo the test on a Debian 12 machine (root, with the packages
rdmabot's scripts/setup.sh installs: qemu-system-x86, the kernel's build
tools, busybox-static, and apt able to download the guest's packages),
with no rdmabot server and no database:

    ./run.sh

It applies series.mbox to the base commit (the tree git am makes),
builds both kernels with the lab's configuration, builds the guest
image, then boots base and patched kernels alternately on two QEMU
guests joined by soft-RoCE and runs the NFS/RDMA transfer test, round
after round until the statistics decide, and prints the verdict and
the metrics table as rdmabot's reply does. Nothing is sent anywhere.{{if .Lossy}}
As the bot did, it first boots each kernel over the lossy link
(lab.toml's [lab.lossy]), where only a crash counts.{{end}}{{if .ClientSide}}
As the bot did, it first boots the patched kernel on the client, beside
the base kernel on the server, which times and checks the transfer, and
the base the same way (lab.toml's [lab.client_side]), where a crash or
data corruption decides.{{end}}{{if .Pressure}}
As the bot did, it first boots each kernel under Send Queue pressure
(lab.toml's [lab.pressure]), where a crash, or a transport or provider
fault the base does not show, decides.{{end}}

Files:
  run.sh         the one command (LINUX, CACHE and RDMABOT are read from
                 the environment: see its head)
  series.mbox    the series as tested, in order (mboxrd)
  lab.toml       the lab's and the statistics' settings the bot used
  kernel.config  the base kernel's .config as the bot built it (run.sh
                 says where yours differs), when it was still kept
  rdmabot        the bot's binary: only its offline commands are used
                 (apply, build, lab image, lab compare)
{{range .Kept}}  {{printf "%-14s" .Name}} kept from the bot's run, to compare with
{{end}}{{if .QEMUBase}}
The boots, without rdmabot: each guest is one QEMU, as the lab starts
it. BASE and CANDIDATE are the kernels' bzImage, IMAGE the guest image
rdmabot lab image prints (it holds the guest-* scripts), DATA the image
followed by a newc cpio archive of the test's random file at
usr/lib/rdmabot/data, PORT a free port on 127.0.0.1. Start the server
first; the guests power off when the test ends.

The base on both guests:
{{range .QEMUBase}}
  {{.}}
{{end}}
The patched kernel on the {{.Side}}, beside the base:
{{range .QEMUCandidate}}
  {{.}}
{{end}}{{end}}
A QEMU lab's figures are emulation, not hardware: compare a kernel
with its base on the same machine, as run.sh does, never with figures
from another machine.
`))
