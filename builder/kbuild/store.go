package kbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Artifact is a built kernel in the store.
type Artifact struct {
	Key        string `json:"key"`
	Tree       string `json:"tree"`
	Lab        string `json:"lab"`
	ConfigHash string `json:"config_hash"`
	Toolchain  string `json:"toolchain"`
	Compiler   string `json:"compiler"`
	// BuildID is vmlinux's GNU build id (hex), which the running kernel
	// shows in /sys/kernel/notes: the lab checks it booted this kernel.
	BuildID string `json:"build_id"`
	// Files are the stored names: bzImage, System.map, config, build.log,
	// and modules (a directory) for a modular kernel.
	Files []string `json:"files"`

	Dir string `json:"-"` // the artifact's directory in the store
}

// Path is where the stored file name is, "" when the artifact lacks it.
func (a *Artifact) Path(name string) string {
	for _, f := range a.Files {
		if f == name {
			return filepath.Join(a.Dir, name)
		}
	}
	return ""
}

// ArtifactKey is the store key of a kernel: the tree built, the inputs of
// its configuration and the toolchain.
func ArtifactKey(tree, configHash, toolchain string) string {
	h := sha256.Sum256([]byte("tree " + tree + "\nconfig " + configHash + "\ntoolchain " + toolchain + "\n"))
	return hex.EncodeToString(h[:16])
}

// Store keeps artifacts by key, one directory each, written whole under a
// temporary name and renamed into place: a key that exists is complete.
type Store struct{ dir string }

// OpenStore uses dir, creating it.
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, &InfraError{Op: "store", Err: err}
	}
	return &Store{dir: dir}, nil
}

// Lookup returns the artifact stored under key.
func (s *Store) Lookup(key string) (*Artifact, bool) {
	if !validKey(key) {
		return nil, false
	}
	dir := filepath.Join(s.dir, key)
	b, err := os.ReadFile(filepath.Join(dir, "artifact.json"))
	if err != nil {
		return nil, false
	}
	var a Artifact
	if err := json.Unmarshal(b, &a); err != nil || a.Key != key {
		return nil, false
	}
	a.Dir = dir
	return &a, true
}

func validKey(k string) bool {
	if len(k) != 32 {
		return false
	}
	_, err := hex.DecodeString(k)
	return err == nil
}

// Remove deletes the artifact under key, if any.
func (s *Store) Remove(key string) error {
	if !validKey(key) {
		return fmt.Errorf("kbuild: bad store key %q", key)
	}
	if err := os.RemoveAll(filepath.Join(s.dir, key)); err != nil {
		return &InfraError{Op: "store", Err: err}
	}
	return nil
}

// Put copies files (store name -> path; a directory is copied whole) and
// meta under key. When another build stored the key meanwhile, that one
// wins: both are the same kernel.
func (s *Store) Put(key string, files map[string]string, meta Artifact) (*Artifact, error) {
	if a, ok := s.Lookup(key); ok {
		return a, nil
	}
	tmp, err := os.MkdirTemp(s.dir, ".tmp-"+key+"-")
	if err != nil {
		return nil, &InfraError{Op: "store", Err: err}
	}
	defer os.RemoveAll(tmp)
	meta.Key = key
	meta.Files = nil
	for name, src := range files {
		if err := copyTree(src, filepath.Join(tmp, name)); err != nil {
			return nil, &InfraError{Op: "store", Err: err}
		}
		meta.Files = append(meta.Files, name)
	}
	sort.Strings(meta.Files)
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "artifact.json"), append(b, '\n'), 0o644); err != nil {
		return nil, &InfraError{Op: "store", Err: err}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, &InfraError{Op: "store", Err: err}
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, key)); err != nil {
		if a, ok := s.Lookup(key); ok {
			return a, nil
		}
		return nil, &InfraError{Op: "store", Err: err}
	}
	a, ok := s.Lookup(key)
	if !ok {
		return nil, &InfraError{Op: "store", Err: fmt.Errorf("artifact %s unreadable after writing", key)}
	}
	return a, nil
}

// Limits on what the store copies out of a build's output tree.
const (
	maxArtifactFile  = 1 << 30 // one file: bzImage, System.map, a module
	maxArtifactTotal = 4 << 30 // a modules tree
)

// copyTree copies a regular file, or a directory with its regular files,
// directories and local symlinks. Nothing is followed: a symlink where a
// file is named, or in the path leading to it, is an error, as is a FIFO
// or device anywhere; a symlink inside a directory is kept only when its
// target is relative and stays inside (lib/modules' absolute build and
// source links are dropped), so no stored tree points out of the store.
func copyTree(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		_, err := copyFile(src, dst, maxArtifactFile)
		return err
	}
	var total int64
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if !filepath.IsLocal(t) {
				return nil
			}
			return os.Symlink(t, to)
		default:
			n, err := copyFile(p, to, min(maxArtifactFile, maxArtifactTotal-total))
			total += n
			return err
		}
	})
}

// copyFile copies the regular file src (see openRegular) of at most max
// bytes to the new file dst.
func copyFile(src, dst string, max int64) (int64, error) {
	in, fi, err := openRegular(src, max)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, io.LimitReader(in, max))
	if err != nil {
		out.Close()
		return n, err
	}
	return n, out.Close()
}

// CheckKernelImage says whether the file at path is a kernel image the
// labs can boot: a regular file (not a link, in a path without links) no
// larger than the store takes, starting as an x86 boot image ("HdrS"
// setup header) or an ELF file (what the toy tree builds).
func CheckKernelImage(path string) error {
	f, _, err := openRegular(path, maxArtifactFile)
	if err != nil {
		return err
	}
	defer f.Close()
	var hdr [0x206]byte
	n, _ := io.ReadFull(f, hdr[:])
	switch {
	case n >= 4 && string(hdr[:4]) == elf.ELFMAG:
		return nil
	case n == len(hdr) && hdr[510] == 0x55 && hdr[511] == 0xaa && string(hdr[0x202:0x206]) == "HdrS":
		return nil
	}
	return fmt.Errorf("%s: neither an x86 boot image nor an ELF file", path)
}

// ReadBuildID returns the GNU build id note of an ELF file, in hex.
func ReadBuildID(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("build id: %w", err)
	}
	defer f.Close()
	for _, sec := range f.Sections {
		if sec.Type != elf.SHT_NOTE {
			continue
		}
		data, err := sec.Data()
		if err != nil {
			return "", fmt.Errorf("build id: %s: %w", sec.Name, err)
		}
		if id, ok := findBuildID(data, f.ByteOrder); ok {
			return id, nil
		}
	}
	return "", fmt.Errorf("build id: %s has no GNU build id note", path)
}

// findBuildID walks ELF notes (namesz, descsz, type, name, desc; 4-byte
// aligned) for NT_GNU_BUILD_ID from "GNU".
func findBuildID(b []byte, bo binary.ByteOrder) (string, bool) {
	align := func(n uint32) uint32 { return (n + 3) &^ 3 }
	for len(b) >= 12 {
		namesz, descsz, typ := bo.Uint32(b), bo.Uint32(b[4:]), bo.Uint32(b[8:])
		b = b[12:]
		if uint64(align(namesz))+uint64(align(descsz)) > uint64(len(b)) {
			return "", false
		}
		name := b[:namesz]
		desc := b[align(namesz) : align(namesz)+descsz]
		b = b[align(namesz)+align(descsz):]
		if typ == 3 && bytes.Equal(bytes.TrimRight(name, "\x00"), []byte("GNU")) {
			return hex.EncodeToString(desc), true
		}
	}
	return "", false
}

// Toolchain identifies the compiler, assembler and linker: part of the
// artifact key, since a new compiler makes a different kernel.
type Toolchain struct {
	ID       string // hash of the tools' version outputs
	Compiler string // gcc's first --version line
}

// ProbeToolchain asks the host's tools for their versions; they are the
// same files the sandbox sees (/usr is bound read-only).
func ProbeToolchain(ctx context.Context) (Toolchain, error) {
	h := sha256.New()
	var compiler string
	for _, argv := range [][]string{{"gcc", "-v"}, {"gcc", "--version"}, {"ld", "--version"}, {"as", "--version"}, {"make", "--version"}} {
		out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			return Toolchain{}, &InfraError{Op: "toolchain", Err: fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, out)}
		}
		fmt.Fprintf(h, "%s\n%s\n", strings.Join(argv, " "), out)
		if argv[1] == "--version" && argv[0] == "gcc" {
			compiler, _, _ = strings.Cut(string(out), "\n")
		}
	}
	if compiler == "" {
		return Toolchain{}, &InfraError{Op: "toolchain", Err: errors.New("gcc printed no version")}
	}
	return Toolchain{ID: hex.EncodeToString(h.Sum(nil))[:16], Compiler: compiler}, nil
}
