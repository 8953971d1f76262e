// Package decisions reads the decision record (docs/decisions) and finds
// the tags the repository cites: incident numbers (#1008) and proposal
// 038's tags (R4, Q2a, D2, "038 Phase 2a", "038, 4c", a section of the
// proposal quoted after its number, "proposal 037"). Its test fails when a file cites a tag the record has no
// entry for, so no reader meets a tag nothing in the repository defines.
package decisions

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Citation is one tag cited at one place.
type Citation struct {
	File string
	Line int
	Tag  string
}

func (c Citation) String() string { return fmt.Sprintf("%s:%d: %s", c.File, c.Line, c.Tag) }

var (
	// issueRe finds every #NNN; cites decides whether it is ours.
	issueRe = regexp.MustCompile(`#(\d{3,5})\b`)
	// Proposal 038's requirements, questions, decisions and the e2e case
	// the code names. Any number is matched, so that a requirement
	// nobody defined fails instead of passing unseen.
	letterRe = regexp.MustCompile(`\b([RDE][0-9]+|Q[0-9]+[ab]?)\b`)
	phaseRe  = regexp.MustCompile(`\bPhase ([0-9][a-d]?)\b`)
	// "038, 4c" and "038 4c": a phase named without the word.
	barePhaseRe = regexp.MustCompile(`\b038,? ([0-9][a-d])\b`)
	sectionRe   = regexp.MustCompile(`\b038 "([^"]{1,80})"`)
	proposalRe  = regexp.MustCompile(`\b[Pp]roposal (\d{3})\b`)
	// ownerRepoRe is a repository prefix before #NNN: an upstream
	// reference (envoyproxy/envoy#47740, quic-go#2872) unless the
	// repository is aether itself.
	ownerRepoRe = regexp.MustCompile(`[A-Za-z0-9_.\-/]+$`)
	aetherRe    = regexp.MustCompile(`(^|/)aether$`)
)

// Cites returns the tags one file cites, with their lines.
func Cites(file string, src []byte) []Citation {
	var out []Citation
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for n := 1; sc.Scan(); n++ {
		for _, tag := range lineTags(sc.Text()) {
			out = append(out, Citation{file, n, tag})
		}
	}
	// A quoted section name may be wrapped over two comment lines.
	joined, flat := unwrap(src)
	for _, m := range sectionRe.FindAllStringSubmatchIndex(flat, -1) {
		line := 1 + strings.Count(joined[:m[0]], "\n")
		out = append(out, Citation{file, line, `"` + strings.Join(strings.Fields(flat[m[2]:m[3]]), " ") + `"`})
	}
	slices.SortStableFunc(out, func(a, b Citation) int { return a.Line - b.Line })
	return out
}

// unwrap returns src with Go comment markers of continuation lines removed
// (joined, newlines kept, so offsets give lines) and the same with every
// newline a space (flat), so that a quoted name wrapped over two lines is
// read whole.
func unwrap(src []byte) (joined, flat string) {
	joined = commentJoinRe.ReplaceAllString(string(src), "\n")
	return joined, strings.ReplaceAll(joined, "\n", " ")
}

func lineTags(line string) []string {
	var tags []string
	for _, m := range issueRe.FindAllStringSubmatchIndex(line, -1) {
		if ownIssue(line[:m[0]]) {
			tags = append(tags, "#"+line[m[2]:m[3]])
		}
	}
	for _, m := range letterRe.FindAllStringSubmatch(line, -1) {
		tags = append(tags, m[1])
	}
	for _, m := range phaseRe.FindAllStringSubmatch(line, -1) {
		tags = append(tags, "Phase "+m[1])
	}
	for _, m := range barePhaseRe.FindAllStringSubmatch(line, -1) {
		tags = append(tags, "Phase "+m[1])
	}
	for _, m := range proposalRe.FindAllStringSubmatch(line, -1) {
		tags = append(tags, "proposal "+m[1])
	}
	return tags
}

// ownIssue says whether a #NNN preceded by before is an incident of this
// repository: not an HTML entity (&#39;), not a CSS colour (color:#222),
// not another repository's issue (owner/repo#N, repo#N), unless that
// repository is aether.
func ownIssue(before string) bool {
	if before == "" {
		return true
	}
	switch before[len(before)-1] {
	case '&', ':':
		return false
	}
	prefix := ownerRepoRe.FindString(before)
	if prefix == "" {
		return true
	}
	rest := before[:len(before)-len(prefix)]
	if strings.HasSuffix(rest, "#") {
		// A list of our own numbers: #1073/#1074.
		return true
	}
	last := prefix[len(prefix)-1]
	if last == '-' || last == '.' {
		// pre-#1073: a word joined to the number, not a repository.
		return true
	}
	return aetherRe.MatchString(prefix)
}

// entryRe is an entry's heading: "### <tag> — <title>".
var entryRe = regexp.MustCompile(`^#{2,4} (.+?) — `)

// Entry is one entry of the record.
type Entry struct {
	Tag  string
	File string
	Line int
	// Body is the entry's text up to the next heading.
	Body string
}

// Entries returns the entries of one file of the record.
func Entries(file string, md []byte) []Entry {
	var out []Entry
	lines := strings.Split(string(md), "\n")
	for i, l := range lines {
		m := entryRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		e := Entry{Tag: m[1], File: file, Line: i + 1}
		var body []string
		for _, b := range lines[i+1:] {
			if headingRe.MatchString(b) {
				break
			}
			body = append(body, b)
		}
		e.Body = strings.Join(body, "\n")
		out = append(out, e)
	}
	return out
}

// EntryFields are the parts every entry states.
var EntryFields = []string{"**What**:", "**Control**:", "**Pinned by**:"}

// Missing names the fields e lacks.
func (e Entry) Missing() []string {
	var m []string
	for _, f := range EntryFields {
		if !strings.Contains(e.Body, f) {
			m = append(m, f)
		}
	}
	return m
}

var (
	// docRefRe is a citation of a section of one of the repository's
	// documents by path from the root: ARCHITECTURE.md, "The data path";
	// rigs/README.md, "The embedded netns cluster" (the comma optional).
	// A bare "README" is the root's README.md.
	docRefRe = regexp.MustCompile(`\b((?:[a-z0-9_-]+/)*(?:ARCHITECTURE\.md|README(?:\.md)?)),? "([^"]{1,80})"`)
	// commentJoinRe joins a Go comment's continuation lines, so that a
	// section name wrapped over two lines is read whole.
	commentJoinRe = regexp.MustCompile(`\n[ \t]*// ?`)
)

// SectionRef is a citation of a document's section.
type SectionRef struct {
	File string
	Line int
	// Doc is the cited document, by path from the repository root.
	Doc     string
	Section string
}

// SectionRefs returns the document sections a file cites. The line is the
// one the citation starts on.
func SectionRefs(file string, src []byte) []SectionRef {
	joined, flat := unwrap(src)
	var out []SectionRef
	for _, m := range docRefRe.FindAllStringSubmatchIndex(flat, -1) {
		line := 1 + strings.Count(joined[:m[0]], "\n")
		name := strings.Join(strings.Fields(flat[m[4]:m[5]]), " ")
		doc := flat[m[2]:m[3]]
		if strings.HasSuffix(doc, "README") {
			doc += ".md"
		}
		out = append(out, SectionRef{file, line, doc, name})
	}
	return out
}

// headingRe is a Markdown heading.
var headingRe = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)

// Headings returns a Markdown file's headings, backquotes removed.
func Headings(md []byte) []string {
	var out []string
	for _, m := range headingRe.FindAllSubmatch(md, -1) {
		out = append(out, strings.ReplaceAll(string(m[1]), "`", ""))
	}
	return out
}

// HasSection says whether a cited section name is one of headings: the
// heading itself or its start (a heading may add a parenthesis, "Pair
// lifecycle (038 Phase 4b: ...)").
func HasSection(headings []string, name string) bool {
	name = strings.ReplaceAll(name, "`", "")
	for _, h := range headings {
		if h == name || strings.HasPrefix(h, name+" (") || strings.HasPrefix(h, name+":") {
			return true
		}
	}
	return false
}
