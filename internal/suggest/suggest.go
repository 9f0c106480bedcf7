// Package suggest finds the name a user most likely meant when they typed
// one that does not exist: the did-you-mean of job files, config files and
// anything else that refuses an unknown name.
package suggest

import (
	"fmt"
	"slices"
	"strings"
)

// Closest returns the candidate closest to name when it is close enough to be
// a likely typo, or "". "Close enough" is an edit distance of at most 2, and
// less than half the name, so that short names do not match everything.
func Closest(name string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		d := editDistance(strings.ToLower(name), strings.ToLower(c))
		if d < bestD && d*2 < max(len(name), len(c)) {
			best, bestD = c, d
		}
	}
	return best
}

// Hint is the end of an "unknown name" message: a did-you-mean when one
// candidate is close, else the list of what is allowed.
func Hint(name string, candidates []string) string {
	if s := Closest(name, candidates); s != "" {
		return fmt.Sprintf("did you mean %q?", s)
	}
	if len(candidates) == 0 {
		return "nothing is allowed here"
	}
	sorted := slices.Clone(candidates)
	slices.Sort(sorted)
	return "expected one of: " + strings.Join(sorted, ", ")
}

// editDistance is the Levenshtein distance between a and b, in bytes (names
// are ASCII identifiers).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
