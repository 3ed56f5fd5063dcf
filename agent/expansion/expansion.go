// Package expansion expands the API's variable references — $(NAME) in a container's env
// values, command, args and a volumeMount's subPathExpr — with upstream's syntax: "$$" is a
// literal "$", a reference the lookup does not know stays as written, and a "$" that starts
// no reference (or an unclosed "$(") is kept.
package expansion

import "strings"

// Expand replaces each $(NAME) of s with lookup(NAME).
func Expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// Map expands s with the variables of env.
func Map(s string, env map[string]string) string {
	return Expand(s, func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	})
}
