package bootstraptoken

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestGenerateParseRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		tok, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(tok.String())
		if err != nil || got != tok {
			t.Fatalf("Parse(%q) = %v, %v", tok, got, err)
		}
		if seen[tok.ID] {
			t.Fatalf("id %s generated twice", tok.ID)
		}
		seen[tok.ID] = true
	}
}

func TestParseRejects(t *testing.T) {
	for _, s := range []string{"", "abcdef", "abcdef.", "ABCDEF.0123456789abcdef", "abcde.0123456789abcdef",
		"abcdef.0123456789abcde", "abcdef.0123456789abcdefg", "abcdef:0123456789abcdef", " abcdef.0123456789abcdef"} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted", s)
		} else if strings.Contains(err.Error(), "0123456789abcde") {
			t.Errorf("Parse(%q) error leaks the secret: %v", s, err)
		}
	}
}

func TestJoinToken(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	j := JoinToken{CAHash: CAHash(ca), Token: Token{ID: "abcdef", Secret: "0123456789abcdef"}}
	s := j.String()
	if !strings.HasPrefix(s, "K10") || !strings.HasSuffix(s, "::abcdef.0123456789abcdef") || len(s) != 3+64+2+23 {
		t.Fatalf("join token %q", s)
	}
	got, err := ParseJoin(s + "\n")
	if err != nil || got != j {
		t.Fatalf("ParseJoin = %v, %v", got, err)
	}
	if CAHash(ca) == CAHash(append(ca, '\n')) {
		t.Error("hash ignores a changed CA bundle")
	}
	if bare, err := ParseJoin("abcdef.0123456789abcdef"); err != nil || bare.CAHash != "" || bare.Token.ID != "abcdef" {
		t.Errorf("a bare token: %+v, %v", bare, err)
	}
	for _, bad := range []string{
		"abcdef.0123456789abcdeF",
		"K10" + strings.Repeat("0", 64) + "abcdef.0123456789abcdef",
		"K10" + strings.Repeat("0", 63) + "::abcdef.0123456789abcdef",
		"K10" + strings.Repeat("g", 64) + "::abcdef.0123456789abcdef",
		"K10" + strings.Repeat("0", 64) + "::server:password",
	} {
		if _, err := ParseJoin(bad); err == nil {
			t.Errorf("ParseJoin(%q) accepted", bad)
		}
	}
}

func TestAuthenticator(t *testing.T) {
	tok := Token{ID: "abcdef", Secret: "0123456789abcdef"}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	valid := Secret(tok, "join", time.Time{}, NodeGroup)
	deleting := valid.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	expired := Secret(tok, "join", now.Add(-time.Second))
	future := Secret(tok, "join", now.Add(time.Hour))
	wrongType := valid.DeepCopy()
	wrongType.Type = corev1.SecretTypeOpaque
	noAuth := valid.DeepCopy()
	delete(noAuth.Data, keyUsageAuthentication)
	badGroup := valid.DeepCopy()
	badGroup.Data[keyExtraGroups] = []byte("system:masters")
	wrongID := valid.DeepCopy()
	wrongID.Data[keyID] = []byte("zzzzzz")

	for _, tc := range []struct {
		name     string
		secret   *corev1.Secret
		token    string
		ok       bool
		err      bool
		wantUser string
		groups   []string
	}{
		{"valid with extra group", valid, tok.String(), true, false, "system:bootstrap:abcdef", []string{Group, NodeGroup}},
		{"not yet expired", future, tok.String(), true, false, "system:bootstrap:abcdef", []string{Group}},
		{"wrong secret", valid, "abcdef.0123456789abcdee", false, true, "", nil},
		{"expired", expired, tok.String(), false, true, "", nil},
		{"being deleted", deleting, tok.String(), false, true, "", nil},
		{"wrong type", wrongType, tok.String(), false, true, "", nil},
		{"not for authentication", noAuth, tok.String(), false, true, "", nil},
		{"extra group outside system:bootstrappers", badGroup, tok.String(), false, true, "", nil},
		{"token-id mismatch", wrongID, tok.String(), false, true, "", nil},
		{"no such secret", nil, tok.String(), false, false, "", nil},
		{"not a bootstrap token (a JWT)", valid, "eyJhbGciOi.xyz", false, false, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Authenticator{Now: func() time.Time { return now }, Get: func(_ context.Context, name string) (*corev1.Secret, error) {
				if tc.secret == nil {
					return nil, errors.New("not found")
				}
				if name != "bootstrap-token-abcdef" {
					t.Errorf("looked up %q", name)
				}
				return tc.secret, nil
			}}
			resp, ok, err := a.AuthenticateToken(context.Background(), tc.token)
			if ok != tc.ok || (err != nil) != tc.err {
				t.Fatalf("ok=%v err=%v, want ok=%v err=%v", ok, err, tc.ok, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "0123456789abcde") {
				t.Errorf("error leaks the secret: %v", err)
			}
			if !ok {
				return
			}
			if resp.User.GetName() != tc.wantUser || strings.Join(resp.User.GetGroups(), ",") != strings.Join(tc.groups, ",") {
				t.Errorf("user %q groups %v", resp.User.GetName(), resp.User.GetGroups())
			}
		})
	}
}
