package builder

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/object"
)

// TestApplyConcurrently applies the same series twice at once on one
// Store, as two bot jobs may: run with -race.
func TestApplyConcurrently(t *testing.T) {
	dir, mbox := newCornerRepo(t)
	raw, _ := os.ReadFile(mbox)
	st, err := OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := st.Resolve("base")
	var wg sync.WaitGroup
	res := make([]*Applied, 4)
	errs := make([]error, 4)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msgs := parseMbox(t, raw)
			opts := pinnedOptions()
			opts.Ref = SeriesRef("corner", i+1)
			res[i], errs[i] = st.Apply(context.Background(), c.Hash, msgs, opts)
			if errs[i] == nil {
				var c *object.Commit
				c, errs[i] = st.Resolve(opts.Ref.String())
				if errs[i] == nil && c.Hash != res[i].Commits[len(res[i].Commits)-1] {
					t.Errorf("%s points at %s", opts.Ref, c.Hash)
				}
			}
		}()
	}
	wg.Wait()
	for i := range res {
		if errs[i] != nil {
			t.Fatalf("apply %d: %v", i, errs[i])
		}
		if res[i].Tree != res[0].Tree {
			t.Errorf("apply %d made tree %s, apply 0 %s", i, res[i].Tree, res[0].Tree)
		}
	}
}
