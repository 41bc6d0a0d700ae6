package kbuild

import (
	"context"
	"crypto/sha256"
	"debug/elf"
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
	"time"

	"github.com/rdmabot/rdmabot/internal/elfnote"
	"github.com/rdmabot/rdmabot/internal/flock"
	"github.com/rdmabot/rdmabot/internal/safefile"
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

// OpenStore uses dir, creating it, and removes what a crashed Put or
// Remove left there. That cleaning is best effort: a directory it cannot
// remove (another user's) stays, and the store works all the same.
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, &InfraError{Op: "store", Err: err}
	}
	flock.Stale(dir, ".tmp-", time.Now(), os.RemoveAll)
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
	// Out of place first: a crash while deleting must not leave an
	// artifact.json beside half of its files under the key.
	tmp, release, err := flock.TempDir(s.dir, ".tmp-"+key+"-rm-")
	if err != nil {
		return &InfraError{Op: "store", Err: err}
	}
	defer release()
	if err := os.Rename(filepath.Join(s.dir, key), filepath.Join(tmp, key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		os.Remove(tmp)
		return &InfraError{Op: "store", Err: err}
	}
	if err := os.RemoveAll(tmp); err != nil {
		return &InfraError{Op: "store", Err: err}
	}
	return nil
}

// Forget removes the stored artifact that dir is a copy of, named by
// the copy's artifact.json. The bot's artifact directory holds hard
// links of the store's files: a kernel pruned there frees its disk only
// once the store's copy goes too.
func (s *Store) Forget(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "artifact.json"))
	if err != nil {
		return &InfraError{Op: "store", Err: err}
	}
	var a Artifact
	if err := json.Unmarshal(b, &a); err != nil {
		return &InfraError{Op: "store", Err: fmt.Errorf("%s: %w", dir, err)}
	}
	return s.Remove(a.Key)
}

// Put copies files (store name -> path; a directory is copied whole) and
// meta under key. When another build stored the key meanwhile, that one
// wins: both are the same kernel.
func (s *Store) Put(key string, files map[string]string, meta Artifact) (*Artifact, error) {
	if a, ok := s.Lookup(key); ok {
		return a, nil
	}
	tmp, release, err := flock.TempDir(s.dir, ".tmp-"+key+"-")
	if err != nil {
		return nil, &InfraError{Op: "store", Err: err}
	}
	defer release()
	defer os.RemoveAll(tmp)
	meta.Key = key
	meta.Files = nil
	for name, src := range files {
		if err := safefile.CopyTree(src, filepath.Join(tmp, name), maxArtifactFile, maxArtifactTotal); err != nil {
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

// CheckKernelImage says whether the file at path is a kernel image the
// labs can boot: a regular file (not a link, in a path without links) no
// larger than the store takes, starting as an x86 boot image ("HdrS"
// setup header) or an ELF file (what the toy tree builds).
func CheckKernelImage(path string) error {
	f, _, err := safefile.OpenRegular(path, maxArtifactFile)
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

// ReadBuildID returns the GNU build id note of an ELF file, in hex. The
// file was written by the sandboxed build, so it is opened only if it is
// a regular file reached without symlinks (never a FIFO), and read
// within bounds: the section table entry by entry, and only note
// sections of at most maxNote bytes that lie inside the file.
func ReadBuildID(path string) (string, error) {
	f, fi, err := safefile.OpenRegular(path, -1)
	if err != nil {
		return "", fmt.Errorf("build id: %w", err)
	}
	defer f.Close()
	id, err := elfnote.BuildID(f, fi.Size())
	if err != nil {
		return "", fmt.Errorf("build id: %s: %w", path, err)
	}
	return id, nil
}

// Toolchain identifies the compiler, assembler and linker: part of the
// artifact key, since a new compiler makes a different kernel.
type Toolchain struct {
	ID       string // hash of the tools' version outputs
	Compiler string // gcc's first --version line
	Binutils string // ld's first --version line
}

// Words is the toolchain in a reply's words: compiler and binutils.
func (tc Toolchain) Words() string { return strings.Trim(tc.Compiler+", "+tc.Binutils, ", ") }

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
