package lab

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Clip shortens what a message quotes of a value, so that an error never echoes a huge value
// whole: issue 39 found a 50 MB one-line value in lab.yaml printed back in its error (50,000,133
// bytes). A Go-quoted string (%q) whose value is longer than clipQuoted bytes keeps its first
// clipKeep bytes, then "…" and the value's length; so does any other run of clipRun or more
// bytes without a space (a backquoted YAML scalar, a path); and the whole message is cut at
// clipTotal bytes. Messages of ordinary size come out unchanged. ConfigError.Error applies it,
// and the CLI to every error it prints.
func Clip(s string) string {
	if len(s) <= clipKeep {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] == '"' {
			if q, err := strconv.QuotedPrefix(s[i:]); err == nil {
				if v, err := strconv.Unquote(q); err == nil && len(v) > clipQuoted {
					short := strconv.Quote(prefix(v, clipKeep))
					b.WriteString(short[:len(short)-1] + "…\" (" + strconv.Itoa(len(v)) + " bytes)")
				} else {
					b.WriteString(q)
				}
				i += len(q)
				continue
			}
		}
		j := i
		for j < len(s) && s[j] != ' ' && s[j] != '\n' && s[j] != '"' {
			j++
		}
		if j == i {
			b.WriteByte(s[i])
			i++
			continue
		}
		if run := s[i:j]; len(run) >= clipRun {
			b.WriteString(prefix(run, clipKeep) + "… (" + strconv.Itoa(len(run)) + " bytes)")
		} else {
			b.WriteString(run)
		}
		i = j
	}
	out := b.String()
	if len(out) > clipTotal {
		out = prefix(out, clipTotal) + "… (" + strconv.Itoa(len(out)) + " bytes in all)"
	}
	return out
}

// The limits of Clip, in bytes: a value or run is cut past these, keeping clipKeep.
const (
	clipQuoted = 160
	clipRun    = 320
	clipKeep   = 64
	clipTotal  = 16 << 10
)

// prefix returns s's first n bytes at most, not splitting a UTF-8 sequence.
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
