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

// copyTree copies a file, or a directory with its files and symlinks.
func copyTree(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return copyFile(src, dst, fi)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(t, to)
		default:
			return copyFile(p, to, fi)
		}
	})
}

func copyFile(src, dst string, fi fs.FileInfo) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
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
	Binutils string // ld's first --version line
}

// ProbeToolchain asks the host's tools for their versions; they are the
// same files the sandbox sees (/usr is bound read-only).
func ProbeToolchain(ctx context.Context) (Toolchain, error) {
	h := sha256.New()
	var compiler, binutils string
	for _, argv := range [][]string{{"gcc", "-v"}, {"gcc", "--version"}, {"ld", "--version"}, {"as", "--version"}, {"make", "--version"}} {
		out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			return Toolchain{}, &InfraError{Op: "toolchain", Err: fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, out)}
		}
		fmt.Fprintf(h, "%s\n%s\n", strings.Join(argv, " "), out)
		first, _, _ := strings.Cut(string(out), "\n")
		switch {
		case argv[1] == "--version" && argv[0] == "gcc":
			compiler = first
		case argv[0] == "ld":
			binutils = first
		}
	}
	if compiler == "" {
		return Toolchain{}, &InfraError{Op: "toolchain", Err: errors.New("gcc printed no version")}
	}
	return Toolchain{ID: hex.EncodeToString(h.Sum(nil))[:16], Compiler: compiler, Binutils: binutils}, nil
}
