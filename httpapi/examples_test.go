package httpapi_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/tiers"
)

// exampleBlock is one ```sh block of docs/api-examples.md.
type exampleBlock struct {
	line   int // of the opening fence
	script string
	// want holds the expected status of each curl call, in order; 0
	// means any 2xx.
	want []int
}

var (
	curlCall   = regexp.MustCompile(`(^|[\s($|])curl\s`)
	statusNote = regexp.MustCompile(`^#\s*→\s*(\d{3})\b`)
)

// readExamples extracts the ```sh blocks of a Markdown file. A comment
// line "# → 400" sets the status of the curl call before it.
func readExamples(t *testing.T, path string) []exampleBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []exampleBlock
	var cur *exampleBlock
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```sh":
			cur = &exampleBlock{line: n}
		case cur == nil:
		case strings.TrimSpace(line) == "```":
			blocks = append(blocks, *cur)
			cur = nil
		default:
			cur.script += line + "\n"
			trimmed := strings.TrimSpace(line)
			if m := statusNote.FindStringSubmatch(trimmed); m != nil {
				if len(cur.want) == 0 {
					t.Fatalf("%s:%d: a status note before any curl call", path, n)
				}
				cur.want[len(cur.want)-1], _ = strconv.Atoi(m[1])
			} else if !strings.HasPrefix(trimmed, "#") {
				for range curlCall.FindAllStringIndex(line, -1) {
					cur.want = append(cur.want, 0)
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: unclosed code block", path, cur.line)
	}
	return blocks
}

// TestAPIExamples runs every example of docs/api-examples.md against a
// test gateway holding the series the examples read, and checks the
// status of every curl call.
func TestAPIExamples(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("the examples are curl commands; install curl (apt-get install curl): %v", err)
	}
	path := filepath.Join("..", "docs", "api-examples.md")
	blocks := readExamples(t, path)
	if len(blocks) < 10 {
		t.Fatalf("only %d examples in %s", len(blocks), path)
	}
	s := newTestServer(t)
	now := s.Now()
	var pts []string
	for i := range 288 { // every 10 minutes over the last 2 days
		ts := now - 2*tiers.Day + int64(i)*10*tiers.Minute
		pts = append(pts, fmt.Sprintf(`{"series":"sensor-1","t":%d,"v":%d.5}`, ts, 20+i%5), fmt.Sprintf(`{"series":"sensor-2","t":%d,"v":%d}`, ts, -i%7))
	}
	s.WritePoints(pts...)
	if status, _, body := s.Do("POST", "/v1/admin/rollups/run", "", ""); status != 200 {
		t.Fatalf("rollups: %d %s", status, body)
	}

	// curl is wrapped to record the status of every call and to print
	// bodies as the examples show them; date +%s, which examples take
	// "now" from, tells the gateway's clock, not the wall clock.
	const preamble = `set -eu
date() {
  if [ "$*" = "+%s" ]; then echo "$EXAMPLE_NOW_S"; else command date "$@"; fi
}
curl() {
  status=$(command curl --silent --show-error --output "$EXAMPLE_BODY" --write-out '%{http_code}' "$@") || return $?
  cat "$EXAMPLE_BODY"
  echo "$status" >> "$EXAMPLE_STATUSES"
}
`
	for _, b := range blocks {
		t.Run(fmt.Sprintf("line%d", b.line), func(t *testing.T) {
			dir := t.TempDir()
			statuses := filepath.Join(dir, "statuses")
			cmd := exec.Command("sh", "-c", preamble+b.script)
			cmd.Env = append(os.Environ(), "GATEWAY="+s.URL, "EXAMPLE_BODY="+filepath.Join(dir, "body"), "EXAMPLE_STATUSES="+statuses,
				"EXAMPLE_NOW_S="+strconv.FormatInt(s.Now()/1000, 10))
			out, err := cmd.CombinedOutput()
			if os.Getenv("EXAMPLES_VERBOSE") != "" {
				t.Logf("%s", out)
			}
			if err != nil {
				t.Fatalf("%s:%d: %v\n%s\noutput:\n%s", path, b.line, err, b.script, out)
			}
			raw, err := os.ReadFile(statuses)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			got := strings.Fields(string(raw))
			if len(got) != len(b.want) {
				t.Fatalf("%s:%d: %d curl calls answered, the block has %d\n%s", path, b.line, len(got), len(b.want), b.script)
			}
			for i, g := range got {
				status, _ := strconv.Atoi(g)
				ok := status == b.want[i] || b.want[i] == 0 && status >= 200 && status < 300
				if !ok {
					want := "2xx"
					if b.want[i] != 0 {
						want = strconv.Itoa(b.want[i])
					}
					t.Errorf("%s:%d: call %d answered %d, want %s\n%s\noutput:\n%s", path, b.line, i+1, status, want, b.script, out)
				}
			}
		})
	}
}
