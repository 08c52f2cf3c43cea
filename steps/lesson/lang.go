package lesson

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// The languages of the lessons. English is the original, at the top of the
// lessons' directory; each translation is a sub-directory named by its
// language tag (lessons/zh-TW/01-setup.md), the same file names, the same
// sh and expected blocks byte for byte, the prose translated.
const (
	English = "en"
	// TraditionalChinese is Taiwan's Traditional Chinese, the language of
	// the description of the chain that podlab re-enacts.
	TraditionalChinese = "zh-TW"
)

// ErrBadLang means a language podlab has no lessons in.
var ErrBadLang = errors.New("no lessons in that language")

// ParseLang reads a --lang value: "en", or "zh-TW" (also written zh_TW,
// zh-tw, or a locale such as zh_TW.UTF-8).
func ParseLang(s string) (string, error) {
	if l := localeLang(s); l != "" {
		return l, nil
	}
	return "", fmt.Errorf("--lang %q: %w: use %s (the originals) or %s", s, ErrBadLang, English, TraditionalChinese)
}

// LangFromEnv is the language of the lessons for a user's locale, as
// gettext chooses a message catalog: the first of LC_ALL, LC_MESSAGES and
// LANG that is set decides; zh_TW* is TraditionalChinese, anything else
// (C, POSIX, en_US.UTF-8, zh_CN.UTF-8, unset) English.
func LangFromEnv(getenv func(string) string) string {
	for _, k := range []string{"LC_ALL", "LC_MESSAGES", "LANG"} {
		if v := getenv(k); v != "" {
			if localeLang(v) == TraditionalChinese {
				return TraditionalChinese
			}
			return English
		}
	}
	return English
}

// localeLang is the language of a tag or locale name (en, en_US.UTF-8,
// zh-TW, zh_TW.UTF-8@stroke), or "" if the lessons are not in it.
func localeLang(s string) string {
	s = strings.ToLower(strings.ReplaceAll(s, "_", "-"))
	if i := strings.IndexAny(s, ".@"); i >= 0 {
		s = s[:i]
	}
	switch {
	case s == "en" || strings.HasPrefix(s, "en-"):
		return English
	case s == "zh-tw" || s == "zh-hant-tw":
		return TraditionalChinese
	}
	return ""
}

// Translate returns lessons with each lesson that has a translation into
// lang, in the sub-directory lang of fsys, replaced by it (its Lang set to
// lang); the others stay as they are, in English. A translation must have
// the number and file name of an English lesson. For English, or a language
// with no directory yet, it returns lessons unchanged.
func Translate(fsys fs.FS, lessons []*Lesson, lang string) ([]*Lesson, error) {
	if lang == English {
		return lessons, nil
	}
	sub, err := fs.Sub(fsys, lang)
	if err != nil {
		return nil, fmt.Errorf("the %s lessons: %w", lang, err)
	}
	if _, err := fs.Stat(sub, "."); errors.Is(err, fs.ErrNotExist) {
		return lessons, nil
	}
	translated, err := ListFS(sub)
	if err != nil {
		return nil, fmt.Errorf("the %s lessons: %w", lang, err)
	}
	out := append([]*Lesson(nil), lessons...)
	for _, t := range translated {
		t.Lang = lang
		i := -1
		for j, l := range out {
			if l.File == t.File {
				i = j
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("the %s lesson %s translates no lesson: name it as the English one it translates", lang, t.File)
		}
		out[i] = t
	}
	return out, nil
}
