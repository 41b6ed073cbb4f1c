package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The STS-B cut-offs, fixed before looking at any result.
const (
	stsbDuplicate = 4.5 // at or above: the same meaning
	stsbDistinct  = 2.0 // at or below: a different meaning
)

const stsbRules = `- Each selected STS-B pair is its own session: a comment posted with sentence 1 as its body
  (` + "`execute`" + `), then a re-planned comment on the same issue of the same repository with sentence 2.
  The tool is github-mcp-server's ` + "`add_issue_comment`" + ` (its schema copied verbatim into tools.json):
  body is free text, owner/repo/issue_number are identity fields and equal within a pair.
- Label by the human similarity score, cut-offs fixed in advance: score ≥ 4.5 ("the two
  sentences are completely or mostly equivalent") → the second comment repeats the first:
  ` + "`duplicate`" + `, tag ` + "`paraphrase`" + `; score ≤ 2.0 → a different comment: ` + "`execute`" + `, tag ` + "`hard-negative`" + `.
  Pairs in between are not used. Pairs are taken in the order of a hash of their id (to mix
  genres), up to the limit per class.
- Every event is tagged ` + "`write`" + ` and with the pair's genre.`

var stsbImporter = Importer{
	Name:    "stsb",
	Summary: "STS-B pairs as free-text comment bodies (SRC: stsb/sts-<split>.csv; needs github-mcp-server beside stsb/)",
	Rules:   stsbRules,
	Import:  importSTSB,
}

type stsbPair struct {
	genre, id string
	score     float64
	s1, s2    string
	order     uint32
}

func importSTSB(cfg ImportConfig) (ImportStats, error) {
	limit := cfg.Limit
	if limit == 0 {
		limit = 150
	}
	snap := filepath.Join(filepath.Dir(cfg.Src), "..", "github-mcp-server", "__toolsnaps__", "add_issue_comment.snap")
	tool, err := os.ReadFile(snap)
	if err != nil {
		return ImportStats{}, fmt.Errorf("%w: the comment tool's schema: %v", ErrImport, err)
	}
	f, err := os.Open(cfg.Src)
	if err != nil {
		return ImportStats{}, fmt.Errorf("%w: %v", ErrImport, err)
	}
	defer f.Close()
	var dups, dist []stsbPair
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) < 7 {
			continue // a few upstream lines carry extra source columns; short ones are skipped
		}
		score, err := strconv.ParseFloat(cols[4], 64)
		if err != nil {
			return ImportStats{}, fmt.Errorf("%w: %s:%d: score %q", ErrImport, cfg.Src, n, cols[4])
		}
		h := fnv.New32a()
		h.Write([]byte(cols[1] + "/" + cols[2] + "/" + cols[3]))
		p := stsbPair{genre: cols[0], id: cols[1] + "-" + cols[2] + "-" + cols[3], score: score,
			s1: strings.TrimSpace(cols[5]), s2: strings.TrimSpace(cols[6]), order: h.Sum32()}
		if p.s1 == "" || p.s2 == "" || p.s1 == p.s2 {
			continue
		}
		switch {
		case score >= stsbDuplicate:
			dups = append(dups, p)
		case score <= stsbDistinct:
			dist = append(dist, p)
		}
	}
	if err := sc.Err(); err != nil {
		return ImportStats{}, fmt.Errorf("%w: %v", ErrImport, err)
	}
	take := func(ps []stsbPair) []stsbPair {
		sort.SliceStable(ps, func(i, j int) bool { return ps[i].order < ps[j].order })
		return ps[:min(limit, len(ps))]
	}
	pairs := append(take(dups), take(dist)...)
	sort.SliceStable(pairs, func(i, j int) bool { return pairs[i].order < pairs[j].order })
	var b builder
	b.tools = []json.RawMessage{json.RawMessage(tool)}
	ok := &Outcome{Status: "success", Result: json.RawMessage(`{"id":1}`), AfterMS: 200}
	for i, p := range pairs {
		session := fmt.Sprintf("stsb-%d", i+1)
		genre := strings.ReplaceAll(p.genre, "main-", "")
		args := func(body string) json.RawMessage {
			return mustJSON(map[string]any{"owner": "stsb", "repo": genre, "issue_number": i + 1, "body": body})
		}
		intent := "stsb/" + p.id
		line := b.add(Event{Session: session, Workflow: session, Step: "1", Tool: "add_issue_comment", Arguments: args(p.s1),
			Outcome: ok, Truth: &Truth{Intent: intent + "/1", Expect: "execute"}, Tags: []string{"write", genre}}, 1000)
		e := Event{Session: session, Workflow: session, Step: "2", Tool: "add_issue_comment", Arguments: args(p.s2), Outcome: ok}
		if p.score >= stsbDuplicate {
			e.Truth = &Truth{Intent: intent + "/1", Expect: "duplicate", Of: line}
			e.Tags = []string{"write", genre, "paraphrase"}
		} else {
			e.Truth = &Truth{Intent: intent + "/2", Expect: "execute"}
			e.Tags = []string{"write", genre, "hard-negative"}
		}
		b.add(e, 1000)
	}
	readme := fmt.Sprintf(`# STS-B pairs as comment bodies (imported from %s)

Source: the STS Benchmark (original csv) via Sanjithae/sensim @ b914da2b0f03fd2e1192f4dfe23f34841c5d5cb2,
as copied to `+"`../shared/data/upstream/stsb/`"+`; the tool schema is github-mcp-server's
`+"`add_issue_comment`"+` (github/github-mcp-server @ 64a49f34d076b6f5917dae1424521d43c7bcae84, MIT).
Licence: scores CC BY-SA 4.0; the sentences carry their own source licences (MSRpar/MSRvid:
Microsoft research licences — check before commercial use; Stack Exchange parts: CC BY-SA 3.0;
headlines: EMM, acknowledge; images: CC BY-SA); see `+"`../shared/data/upstream/stsb/LICENSE.txt`"+`.

Rebuild: `+"`idem bench import stsb ../shared/data/upstream/stsb/%s <OUT>`"+`

## Label rules

%s
`, filepath.Base(cfg.Src), filepath.Base(cfg.Src), stsbRules)
	return b.write(cfg, readme)
}
