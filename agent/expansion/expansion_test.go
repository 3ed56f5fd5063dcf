package expansion

import "testing"

func TestMap(t *testing.T) {
	env := map[string]string{"TEST_VAR": "test-value", "EMPTY": "", "A": "a"}
	for in, want := range map[string]string{
		"":                        "",
		"plain":                   "plain",
		"$(TEST_VAR)":             "test-value",
		"pre-$(TEST_VAR)-post":    "pre-test-value-post",
		"$$(TEST_VAR)":            "$(TEST_VAR)", // escaped
		"$$$(TEST_VAR)":           "$test-value",
		"$(UNKNOWN)":              "$(UNKNOWN)",
		"$(EMPTY)x":               "x",
		"$(A)$(A)":                "aa",
		"$(unclosed":              "$(unclosed",
		"$(A":                     "$(A",
		"$A":                      "$A",
		"a$":                      "a$",
		"$":                       "$",
		"$$":                      "$",
		"cost $5":                 "cost $5",
		"$(A)$":                   "a$",
		"$()":                     "$()",
		"echo $(TEST_VAR) $$HOME": "echo test-value $HOME",
	} {
		if got := Map(in, env); got != want {
			t.Errorf("Map(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestExpandLookup(t *testing.T) {
	var asked []string
	got := Expand("$(A)/$(B)/$$(C)", func(n string) (string, bool) {
		asked = append(asked, n)
		return "<" + n + ">", n == "A"
	})
	if got != "<A>/$(B)/$(C)" || len(asked) != 2 {
		t.Errorf("Expand = %q, asked %v", got, asked)
	}
}

func TestExpandCases(t *testing.T) {
	env := map[string]string{"A": "x", "B": "y", "": "empty-name", "D$": "odd"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for in, want := range map[string]string{
		"":               "",
		"plain":          "plain",
		"$(A)":           "x",
		"$(A)/$(B)":      "x/y",
		"pre-$(A)-post":  "pre-x-post",
		"$(A)$(B)":       "xy",
		"$$(A)":          "$(A)", // escaped
		"$$":             "$",
		"$$$(A)":         "$x",
		"$$$$":           "$$",
		"$(UNKNOWN)":     "$(UNKNOWN)", // left as written
		"$(A":            "$(A",        // unclosed
		"$(A$(B)":        "$(A$(B)",    // the reference name runs to the first ')': "A$(B", unknown
		"$()":            "empty-name",
		"$A":             "$A",
		"a$":             "a$",
		"$":              "$",
		"$é$(A)":         "$éx",
		"$(D$)":          "odd",
		"$(A))":          "x)",
		"((A))":          "((A))",
		"$(A)$$(B)$(B)$": "x$(B)y$",
	} {
		if got := Expand(in, lookup); got != want {
			t.Errorf("Expand(%q) = %q, want %q", in, got, want)
		}
	}
}
