package lab

// Nearest and editDistance pick the known word closest to a mistyped one, for "did you mean"
// in usage errors: an unknown lab.yaml field (parse.go), an unknown verb (cmd/labbuild-full).
// Standard library only, so the CLI pays nothing for it at start-up.

import "strings"

// editDistance is the optimal-string-alignment distance of a and b, counted in bytes (the words
// are ASCII names): insertions, deletions, substitutions and transpositions of two adjacent
// bytes each count one, so "grpah" is one edit from "graph", as people mistype. Words over 64
// bytes are not compared: the distance is then 1<<20.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 20
	}
	// Three rows of the matrix: i-2, i-1 and i.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			c = min(c, prev[j]+1, cur[j-1]+1)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				c = min(c, prev2[j-2]+1)
			}
			cur[j] = c
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// Nearest returns the candidate closest to w, ignoring case, and whether it is close enough to
// suggest: at most 2 edits, or at most a third of the candidate's length, or equal but for
// case. Ties go to the earlier candidate, so pass candidates sorted for a stable answer.
func Nearest(w string, candidates []string) (string, bool) {
	best, bestD := "", 1<<30
	lw := strings.ToLower(w)
	for _, c := range candidates {
		if d := editDistance(lw, strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		return "", false
	}
	return best, bestD <= 2 || bestD <= len(best)/3 || strings.EqualFold(best, w)
}
