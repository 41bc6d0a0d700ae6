package reports

import (
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMarkdownGolden(t *testing.T) {
	c := testConfig()
	for o, v := range verdicts(t) {
		t.Run(o.String(), func(t *testing.T) {
			md, err := RenderMarkdown(&c, &v, "20261130040506.000000000000-rdmabot@rdmabot.example.org")
			if !o.Mailed() {
				if err == nil {
					t.Fatalf("%v must not be posted", o)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "github/"+strings.ToLower(o.String())+".md", []byte(md))
			if strings.Count(md, "<details>") != strings.Count(md, "</details>") || !strings.Contains(md, "<details>") {
				t.Error("details must be collapsed in balanced <details> blocks")
			}
			if !strings.HasSuffix(md, commentMarker("20261130040506.000000000000-rdmabot@rdmabot.example.org")+"\n") {
				t.Error("the comment must end with its marker")
			}
		})
	}
}

func TestHTMLGolden(t *testing.T) {
	c := testConfig()
	// Every outcome has a run page, the unmailed ones included: it is
	// where an operator looks.
	for o, v := range verdicts(t) {
		page, err := RenderHTML(&c, &v)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "html/"+strings.ToLower(o.String())+".html", page)
		s := string(page)
		for _, bad := range []string{"<script", "<link", "src=", "@import", "url("} {
			if strings.Contains(s, bad) {
				t.Errorf("%v page has %q: it must be self-contained", o, bad)
			}
		}
	}
}

// TestHTMLScreenshot renders the run page in headless Chromium and looks
// at the picture: both series' colours must be drawn across the chart.
func TestHTMLScreenshot(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (Debian package chromium)")
	}
	c := testConfig()
	v := verdicts(t)[Regression]
	page, err := RenderHTML(&c, &v)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	html := filepath.Join(dir, "run.html")
	shot := filepath.Join(dir, "run.png")
	if err := os.WriteFile(html, page, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--no-first-run", "--user-data-dir="+filepath.Join(dir, "profile"),
		"--hide-scrollbars", "--window-size=900,1100", "--screenshot="+shot, "file://"+html)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if keep := os.Getenv("RDMABOT_KEEP_SCREENSHOT"); keep != "" {
		b, _ := os.ReadFile(shot)
		_ = os.WriteFile(keep, b, 0o644)
	}
	base := colorBox(img, BaseColor)
	patched := colorBox(img, PatchedColor)
	t.Logf("base pixels %d in %v, patched pixels %d in %v", base.n, base.r, patched.n, patched.r)
	for name, b := range map[string]box{"base": base, "patched": patched} {
		// A chart line, not just a legend swatch: hundreds of pixels
		// spread over most of the 720-pixel-wide plot.
		if b.n < 300 || b.r.Dx() < 500 {
			t.Errorf("%s series not drawn: %d pixels over %v", name, b.n, b.r)
		}
	}
	if !base.r.Overlaps(patched.r) {
		t.Errorf("the two series are not in the same chart: %v vs %v", base.r, patched.r)
	}
}

type box struct {
	r image.Rectangle
	n int
}

// colorBox counts pixels within a small distance of hex colour and
// returns their bounding box (ignoring the legend swatches, which are
// inside the box anyway).
func colorBox(img image.Image, hex string) box {
	want := [3]int{}
	for i := range want {
		v, _ := strconv.ParseUint(hex[1+2*i:3+2*i], 16, 8)
		want[i] = int(v)
	}
	var b box
	first := true
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			d := iabs(int(r>>8)-want[0]) + iabs(int(g>>8)-want[1]) + iabs(int(bl>>8)-want[2])
			if d > 12 {
				continue
			}
			b.n++
			p := image.Rect(x, y, x+1, y+1)
			if first {
				b.r, first = p, false
			} else {
				b.r = b.r.Union(p)
			}
		}
	}
	return b
}

func iabs(a int) int {
	if a < 0 {
		return -a
	}
	return a
}
