package kbuild

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

//go:embed configs/*.config
var fragmentFS embed.FS

// Lab says how the kernel for one lab is configured and what is built.
type Lab struct {
	Name string
	Arch string // make ARCH=
	// Base is a make config target (tinyconfig, defconfig), unless BaseFile
	// names a .config to start from.
	Base     string
	BaseFile string
	// TreeFragments are the tree's own fragments, applied as make targets
	// (kvm_guest.config).
	TreeFragments []string
	// Fragments are the project's fragments (embedded, under configs/),
	// merged last; every option they set is verified after olddefconfig.
	Fragments []string
}

// Labs are the kernels the project knows how to configure.
var labs = map[string]Lab{
	"qemu": {
		Name: "qemu", Arch: "x86_64", Base: "tinyconfig",
		TreeFragments: []string{"kvm_guest.config"},
		Fragments:     []string{"qemu-softroce.config"},
	},
	// The debug profile's kernel (lab.debug): the qemu lab's with KASAN,
	// lockdep and line tables.
	"qemu-debug": {
		Name: "qemu-debug", Arch: "x86_64", Base: "tinyconfig",
		TreeFragments: []string{"kvm_guest.config"},
		Fragments:     []string{"qemu-softroce.config", "debug.config"},
	},
	"opa": {
		Name: "opa", Arch: "x86_64", Base: "defconfig",
		Fragments: []string{"omnipath.config"},
	},
	"hw": {
		Name: "hw", Arch: "x86_64", Base: "defconfig",
		Fragments: []string{"rdma-hw.config"},
	},
}

// LookupLab returns the named lab's configuration.
func LookupLab(name string) (Lab, error) {
	l, ok := labs[name]
	if !ok {
		names := make([]string, 0, len(labs))
		for n := range labs {
			names = append(names, n)
		}
		sort.Strings(names)
		return Lab{}, fmt.Errorf("kbuild: unknown lab %q (known: %s)", name, strings.Join(names, ", "))
	}
	return l, nil
}

// Fragment returns an embedded fragment's text.
func Fragment(name string) ([]byte, error) {
	b, err := fragmentFS.ReadFile("configs/" + name)
	if err != nil {
		return nil, fmt.Errorf("kbuild: no config fragment %q", name)
	}
	return b, nil
}

// ConfigHash identifies everything that decides the .config besides the
// tree: base, fragments and their text. With the tree id and toolchain it
// keys the artifact store, so it is known before anything is built.
func (l Lab) ConfigHash() (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "arch %s\nbase %s\n", l.Arch, l.Base)
	if l.BaseFile != "" {
		b, err := os.ReadFile(l.BaseFile)
		if err != nil {
			return "", fmt.Errorf("kbuild: base config: %w", err)
		}
		fmt.Fprintf(h, "basefile %d\n", len(b))
		h.Write(b)
	}
	for _, f := range l.TreeFragments {
		fmt.Fprintf(h, "tree-fragment %s\n", f)
	}
	for _, f := range l.Fragments {
		b, err := Fragment(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "fragment %s %d\n", f, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// DebugLab names the debug profile's variant of a lab's kernel (the
// lab's configuration plus debug.config); LookupLab knows it only for
// the labs that have one.
func DebugLab(lab string) string { return lab + "-debug" }

// DebugInfo says the lab's kernel has line tables (one of its fragments
// asks for DWARF), so the store keeps its vmlinux for decoding crashes.
// The fragments are verified after olddefconfig, so what they set holds.
func (l Lab) DebugInfo() bool {
	for _, f := range l.Fragments {
		b, err := Fragment(f)
		if err != nil {
			continue
		}
		for opt, v := range ParseConfig(b) {
			if v == "y" && strings.HasPrefix(opt, "CONFIG_DEBUG_INFO_DWARF") {
				return true
			}
		}
	}
	return false
}

var (
	setRE    = regexp.MustCompile(`^(CONFIG_[A-Za-z0-9_]+)=(.*)$`)
	notSetRE = regexp.MustCompile(`^# (CONFIG_[A-Za-z0-9_]+) is not set$`)
)

// ParseConfig reads .config or fragment text into option -> value, with
// "n" for "# CONFIG_X is not set". Later lines win, as in Kconfig.
func ParseConfig(b []byte) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if s := setRE.FindStringSubmatch(line); s != nil {
			m[s[1]] = s[2]
		} else if s := notSetRE.FindStringSubmatch(line); s != nil {
			m[s[1]] = "n"
		}
	}
	return m
}

// VerifyConfig checks that every option the lab's fragments request has
// its value in the final .config. A request for "m" is met by "y" (the
// code is there, built in because something needs it so); "n" is met by
// an absent symbol. Losses come back sorted by option.
func (l Lab) VerifyConfig(final []byte) ([]ConfigLoss, error) {
	got := ParseConfig(final)
	var lost []ConfigLoss
	for _, f := range l.Fragments {
		b, err := Fragment(f)
		if err != nil {
			return nil, err
		}
		for opt, want := range ParseConfig(b) {
			have, ok := got[opt]
			switch {
			case ok && have == want:
			case want == "m" && have == "y":
			case want == "n" && (!ok || have == "n"):
			default:
				lost = append(lost, ConfigLoss{Option: opt, Want: want, Got: have, Source: f})
			}
		}
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i].Option < lost[j].Option })
	return lost, nil
}

// ConfigWords describes the configuration of lab's kernels for a reply:
// kbuild's base target, the tree's fragments and rdmabot's own, each of
// those linked in the repository at docsURL when that is on GitHub; ""
// for an unknown lab.
func ConfigWords(lab, docsURL string) string {
	l, err := LookupLab(lab)
	if err != nil {
		return ""
	}
	parts := []string{l.Arch + " " + l.Base}
	if l.BaseFile != "" {
		parts[0] = l.Arch + " " + filepath.Base(l.BaseFile)
	}
	parts = append(parts, l.TreeFragments...)
	var links []string
	for _, f := range l.Fragments {
		parts = append(parts, "rdmabot's "+f)
		if strings.HasPrefix(docsURL, "https://github.com/") {
			links = append(links, strings.TrimRight(docsURL, "/")+"/blob/main/builder/kbuild/configs/"+f)
		}
	}
	s := strings.Join(parts, " + ")
	if len(links) > 0 {
		s += " (" + strings.Join(links, " ") + ")"
	}
	return s
}
