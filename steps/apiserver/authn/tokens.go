package authn

import (
	"bytes"
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/podlab/podlab/steps/statedir"
)

// ErrUnknownUser is returned by TokenFor for a name the token file does not
// hold.
var ErrUnknownUser = errors.New("no such user in the token file")

// Entry is one line of the token file: a bearer token and who it proves
// you are.
type Entry struct {
	Token string
	User  User
}

// Tokens is a loaded static token file, kube-apiserver's --token-auth-file.
type Tokens struct {
	path    string
	byToken map[string]User
	byName  map[string]string
	entries []Entry
}

// Path is where podlab keeps the token file under a state directory.
func Path(stateDir string) string {
	return statedir.Layout{Dir: stateDir}.TokensFile()
}

// NewToken returns a random bearer token: 32 hex digits, 128 bits.
func NewToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// WriteFile writes entries as a static token file, mode 0600 (it holds
// credentials), in kube-apiserver's format: token,user,uid,"group1,group2".
func WriteFile(path string, entries []Entry) error {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	for _, e := range entries {
		if err := w.Write([]string{e.Token, e.User.Name, e.User.UID, strings.Join(e.User.Groups, ",")}); err != nil {
			return err
		}
	}
	w.Flush()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("writing the token file: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("writing the token file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing the token file: %w", err)
	}
	return nil
}

// Load reads a static token file. Every user it names is also in the group
// system:authenticated, as kube-apiserver adds it to every authenticated
// request.
func Load(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no token file at %s: run `podlab init` first (lessons/02-apiserver.md)", path)
		}
		return nil, fmt.Errorf("reading the token file: %w", err)
	}
	defer f.Close()
	return parse(f, path)
}

func parse(r io.Reader, path string) (*Tokens, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	t := &Tokens{path: path, byToken: map[string]User{}, byName: map[string]string{}}
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the token file %s: %w", path, err)
		}
		if len(rec) < 3 || rec[0] == "" || rec[1] == "" {
			return nil, fmt.Errorf("token file %s, line %d: want token,user,uid[,\"groups\"], got %d fields", path, line, len(rec))
		}
		u := User{Name: rec[1], UID: rec[2]}
		if len(rec) > 3 && rec[3] != "" {
			u.Groups = strings.Split(rec[3], ",")
		}
		if _, dup := t.byToken[rec[0]]; dup {
			return nil, fmt.Errorf("token file %s, line %d: a token is used twice", path, line)
		}
		t.byToken[rec[0]] = u
		t.byName[u.Name] = rec[0]
		t.entries = append(t.entries, Entry{Token: rec[0], User: u})
	}
	return t, nil
}

// Authenticate returns the user a bearer token belongs to, with the group
// system:authenticated added; ok is false for an unknown token.
func (t *Tokens) Authenticate(token string) (u User, ok bool) {
	u, ok = t.byToken[token]
	if !ok {
		return User{}, false
	}
	u.Groups = append(append([]string(nil), u.Groups...), GroupAuthenticated)
	return u, true
}

// TokenFor returns the token of the user called name: what `--as NAME`
// uses, so that a learner can act as any user of the lab without copying
// tokens around.
func (t *Tokens) TokenFor(name string) (string, error) {
	tok, ok := t.byName[name]
	if !ok {
		return "", fmt.Errorf("%w: %q (users: %s)", ErrUnknownUser, name, strings.Join(t.Names(), ", "))
	}
	return tok, nil
}

// Names lists the users, in file order.
func (t *Tokens) Names() []string {
	names := make([]string, len(t.entries))
	for i, e := range t.entries {
		names[i] = e.User.Name
	}
	return names
}

// Entries returns the file's entries, in order.
func (t *Tokens) Entries() []Entry { return append([]Entry(nil), t.entries...) }

// Path is the file the tokens were loaded from.
func (t *Tokens) Path() string { return t.path }
