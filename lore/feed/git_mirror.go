package feed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
)

// mirror brings Dir/git/N.git up to date with the server for the epochs
// from first (or only the newest, when first < 0) to the newest. A forced
// refspec takes a rewritten history; go-git never prunes the old objects,
// which the rewrite comparison needs.
func (g *Git) mirror(ctx context.Context, first int) error {
	hc := g.HTTP
	if hc == nil {
		hc = &HTTPClient{}
	}
	base := strings.TrimSuffix(g.URL, "/")
	epochs, err := hc.Epochs(ctx, base)
	if err != nil {
		return err
	}
	newest := epochs[len(epochs)-1]
	if first < 0 {
		first = newest
	}
	for _, n := range epochs {
		if n < first {
			continue
		}
		if err := mirrorEpoch(ctx, filepath.Join(g.Dir, "git", strconv.Itoa(n)+".git"), fmt.Sprintf("%s/git/%d.git", base, n)); err != nil {
			return fmt.Errorf("mirror epoch %d: %w", n, err)
		}
	}
	return nil
}

func mirrorEpoch(ctx context.Context, path, url string) error {
	refs := []config.RefSpec{"+refs/heads/*:refs/heads/*"}
	r, err := git.PlainOpen(path)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		// Clone into a temporary name, so a half-done clone is never
		// taken for an epoch.
		tmp := path + ".tmp"
		if err := os.RemoveAll(tmp); err != nil {
			return err
		}
		if _, err := git.PlainCloneContext(ctx, tmp, true, &git.CloneOptions{URL: url, Mirror: true}); err != nil {
			os.RemoveAll(tmp)
			return err
		}
		return os.Rename(tmp, path)
	}
	if err != nil {
		return err
	}
	err = r.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", RefSpecs: refs, Force: true})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return err
	}
	return nil
}
