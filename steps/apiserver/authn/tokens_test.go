package authn

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTokenFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth", "tokens.csv")
	entries := []Entry{
		{Token: "t-admin", User: User{Name: "admin", UID: "1", Groups: []string{GroupMasters}}},
		{Token: "t-dev", User: User{Name: "developer", UID: "2", Groups: []string{"developers", "qa"}}},
		{Token: "t-sched", User: User{Name: "system:kube-scheduler", UID: "3"}},
	}
	if err := WriteFile(path, entries); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the token file has mode %v, want 0600: it holds credentials", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), `t-dev,developer,2,"developers,qa"`) {
		t.Errorf("not kube-apiserver's format (token,user,uid,\"groups\"):\n%s", data)
	}
	tokens, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		token  string
		ok     bool
		user   string
		groups string
	}{
		{"admin", "t-admin", true, "admin", "system:masters,system:authenticated"},
		{"groups kept", "t-dev", true, "developer", "developers,qa,system:authenticated"},
		{"no groups", "t-sched", true, "system:kube-scheduler", "system:authenticated"},
		{"unknown", "nope", false, "", ""},
		{"empty", "", false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, ok := tokens.Authenticate(tt.token)
			if ok != tt.ok || u.Name != tt.user || strings.Join(u.Groups, ",") != tt.groups {
				t.Errorf("Authenticate(%q) = %+v, %v; want %s in %s, %v", tt.token, u, ok, tt.user, tt.groups, tt.ok)
			}
		})
	}
	if tok, err := tokens.TokenFor("developer"); err != nil || tok != "t-dev" {
		t.Errorf("TokenFor(developer) = %q, %v", tok, err)
	}
	if _, err := tokens.TokenFor("mallory"); !errors.Is(err, ErrUnknownUser) || !strings.Contains(err.Error(), "admin, developer, system:kube-scheduler") {
		t.Errorf("TokenFor(mallory) = %v, want ErrUnknownUser listing the users", err)
	}
	// Authenticate must not let callers change the stored groups
	u, _ := tokens.Authenticate("t-dev")
	u.Groups[0] = "system:masters"
	if again, _ := tokens.Authenticate("t-dev"); again.Groups[0] != "developers" {
		t.Errorf("changing a returned user changed the token file's: %v", again.Groups)
	}
}

func TestBadTokenFiles(t *testing.T) {
	tests := []struct {
		name, content, says string
	}{
		{"too few fields", "tok,user\n", "want token,user,uid"},
		{"empty token", ",user,1\n", "want token,user,uid"},
		{"duplicate token", "a,u1,1\na,u2,2\n", "used twice"},
		{"broken quotes", "a,u1,1,\"g1\n", "reading the token file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens.csv")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := Load(path); err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("Load = %v, want an error saying %q", err, tt.says)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.csv")); err == nil || !strings.Contains(err.Error(), "podlab init") {
		t.Errorf("a missing file: %v, want a hint to run podlab init", err)
	}
}
