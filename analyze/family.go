package analyze

import "strings"

// Family returns the thread family a comm belongs to: the name with instance
// numbers removed, so that the threads of one pool share a family
// ("ib_io_rd-3" → "ib_io_rd", "wl-worker-2" → "wl-worker", "GC Thread#3" →
// "GC Thread", "grpc-0x7f3a" → "grpc"). Repeatedly, it strips from the end:
//   - a separator (- _ / : . # or space) followed by decimal digits;
//   - a separator followed by a hex id: "0x" and hex digits, or at least four
//     hex digits of which at least one is a decimal digit (so that words such
//     as "-cafe" stay);
//   - bare trailing decimal digits ("worker12" → "worker").
//
// A name that would become empty (all digits) is kept as it is. Families are
// a hint for grouping, never for classifying: the class of a group comes from
// its behaviour.
func Family(comm string) string {
	name := strings.TrimSpace(comm)
	for {
		next := strings.TrimSpace(stripInstance(name))
		if next == name || next == "" {
			return name
		}
		name = next
	}
}

func isSep(c byte) bool {
	switch c {
	case '-', '_', '/', ':', '.', '#', ' ':
		return true
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// stripInstance removes one trailing instance number, if there is one.
func stripInstance(s string) string {
	// Trailing run of hex characters.
	i := len(s)
	for i > 0 && isHex(s[i-1]) {
		i--
	}
	tail := s[i:]
	if tail == "" {
		return strings.TrimRight(s, "-_/:.# ")
	}
	allDigits, anyDigit := true, false
	for j := 0; j < len(tail); j++ {
		if isDigit(tail[j]) {
			anyDigit = true
		} else {
			allDigits = false
		}
	}
	head := s[:i]
	switch {
	case strings.HasSuffix(head, "0x") || strings.HasSuffix(head, "0X"):
		// "0x7f3a": the hex id with its prefix.
		return trimSep(head[:len(head)-2])
	case allDigits && i > 0 && isSep(s[i-1]):
		return trimSep(head)
	case allDigits:
		// Bare digits after letters: "worker12".
		return head
	case anyDigit && len(tail) >= 4 && i > 0 && isSep(s[i-1]):
		return trimSep(head)
	}
	// The hex run may end in decimal digits glued to a word ("abc12"):
	// strip just those.
	j := len(s)
	for j > 0 && isDigit(s[j-1]) {
		j--
	}
	if j < len(s) && j > 0 {
		return s[:j]
	}
	return s
}

// trimSep removes one or more trailing separators.
func trimSep(s string) string { return strings.TrimRight(s, "-_/:.# ") }
