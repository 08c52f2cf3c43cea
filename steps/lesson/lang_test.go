package lesson_test

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/podlab/podlab/steps/lesson"
)

func TestParseLang(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"english", "en", lesson.English},
		{"english, upper case", "EN", lesson.English},
		{"english locale", "en_US.UTF-8", lesson.English},
		{"english tag with region", "en-GB", lesson.English},
		{"zh-TW tag", "zh-TW", lesson.TraditionalChinese},
		{"zh-TW, lower case", "zh-tw", lesson.TraditionalChinese},
		{"zh_TW, as a locale writes it", "zh_TW", lesson.TraditionalChinese},
		{"zh_TW locale with charset", "zh_TW.UTF-8", lesson.TraditionalChinese},
		{"zh_TW locale with modifier", "zh_TW.UTF-8@stroke", lesson.TraditionalChinese},
		{"zh-Hant-TW, with its script", "zh-Hant-TW", lesson.TraditionalChinese},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lesson.ParseLang(tt.in)
			if err != nil || got != tt.want {
				t.Errorf("ParseLang(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseLang_Bad(t *testing.T) {
	for _, in := range []string{
		"",
		"fr",
		"zh",          // which Chinese? the lessons are in Taiwan's
		"zh-CN",       // Simplified, mainland usage: not translated
		"zh_CN.UTF-8", // the same, as a locale
		"zh-Hant",     // no region: Hong Kong's usage differs from Taiwan's
		"english",
		"C",
	} {
		t.Run(in, func(t *testing.T) {
			got, err := lesson.ParseLang(in)
			if !errors.Is(err, lesson.ErrBadLang) {
				t.Fatalf("ParseLang(%q) = %q, %v; want ErrBadLang", in, got, err)
			}
			// The error says what to type instead.
			for _, want := range []string{`--lang "` + in + `"`, "use en", "zh-TW"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("ParseLang(%q): %q lacks %q", in, err, want)
				}
			}
		})
	}
}

func TestLangFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"nothing set", nil, lesson.English},
		{"LANG zh_TW", map[string]string{"LANG": "zh_TW.UTF-8"}, lesson.TraditionalChinese},
		{"LANG en_US", map[string]string{"LANG": "en_US.UTF-8"}, lesson.English},
		{"LANG zh_CN: not translated", map[string]string{"LANG": "zh_CN.UTF-8"}, lesson.English},
		{"LANG C", map[string]string{"LANG": "C.UTF-8"}, lesson.English},
		{"LC_MESSAGES over LANG", map[string]string{"LC_MESSAGES": "zh_TW.UTF-8", "LANG": "en_US.UTF-8"}, lesson.TraditionalChinese},
		{"LC_ALL over LANG", map[string]string{"LC_ALL": "zh_TW.UTF-8", "LANG": "en_US.UTF-8"}, lesson.TraditionalChinese},
		{"LC_ALL=C over a zh_TW LANG", map[string]string{"LC_ALL": "C", "LANG": "zh_TW.UTF-8"}, lesson.English},
		{"LC_ALL over LC_MESSAGES", map[string]string{"LC_ALL": "en_US.UTF-8", "LC_MESSAGES": "zh_TW.UTF-8"}, lesson.English},
		{"an empty LC_ALL is unset", map[string]string{"LC_ALL": "", "LANG": "zh_TW.Big5"}, lesson.TraditionalChinese},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }
			if got := lesson.LangFromEnv(getenv); got != tt.want {
				t.Errorf("LangFromEnv(%v) = %q, want %q", tt.env, got, tt.want)
			}
		})
	}
}

// translated is a lessons' directory: three English lessons, two of them
// translated.
func translated() fstest.MapFS {
	return fstest.MapFS{
		"01-setup.md":       {Data: []byte("# 01 — Set up\n\n## Commands\n\n" + fence + "sh\necho one\n" + fence + "\n")},
		"02-apiserver.md":   {Data: []byte("# 02 — The gate\n\n## Commands\n\n" + fence + "sh\necho two\n" + fence + "\n")},
		"03-store.md":       {Data: []byte("# 03 — The store\n\n## Commands\n\n" + fence + "sh\necho three\n" + fence + "\n")},
		"README.md":         {Data: []byte("# Lessons\n")},
		"zh-TW/01-setup.md": {Data: []byte("# 01 — 準備\n\n## 命令\n\n" + fence + "sh\necho one\n" + fence + "\n")},
		"zh-TW/03-store.md": {Data: []byte("# 03 — 儲存\n\n## 命令\n\n" + fence + "sh\necho three\n" + fence + "\n")},
		"zh-TW/GLOSSARY.md": {Data: []byte("# 詞彙表\n")},
	}
}

func TestTranslate(t *testing.T) {
	fsys := translated()
	en, err := lesson.ListFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		fsys   fstest.MapFS
		lang   string
		titles string // each lesson's Lang:Title
	}{
		{"english is the original", fsys, lesson.English, ":Set up|:The gate|:The store"},
		{"zh-TW where translated, english elsewhere", fsys, lesson.TraditionalChinese, "zh-TW:準備|:The gate|zh-TW:儲存"},
		{"no zh-TW directory: all english", fstest.MapFS{
			"01-setup.md":     fsys["01-setup.md"],
			"02-apiserver.md": fsys["02-apiserver.md"],
			"03-store.md":     fsys["03-store.md"],
		}, lesson.TraditionalChinese, ":Set up|:The gate|:The store"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lesson.Translate(tt.fsys, en, tt.lang)
			if err != nil {
				t.Fatal(err)
			}
			var titles []string
			for _, l := range got {
				titles = append(titles, l.Lang+":"+l.Title)
			}
			if s := strings.Join(titles, "|"); s != tt.titles {
				t.Errorf("Translate(%s) = %s, want %s", tt.lang, s, tt.titles)
			}
		})
	}
	// The English list is left as it was: a caller may still show it.
	for i, want := range []string{"Set up", "The gate", "The store"} {
		if en[i].Title != want || en[i].Lang != "" {
			t.Errorf("after Translate, the English lesson %d is %q (%q), want %q", i, en[i].Title, en[i].Lang, want)
		}
	}
}

func TestTranslate_Bad(t *testing.T) {
	tests := []struct {
		name  string
		file  string // added under zh-TW/
		text  string
		wants []string
	}{
		{"a translation with no english original", "zh-TW/04-scheduler.md", "# 04 — 調度\n\n## 命令\n",
			[]string{"zh-TW lesson 04-scheduler.md translates no lesson", "name it as the English one"}},
		{"a translation renamed", "zh-TW/02-gate.md", "# 02 — 關卡\n\n## 命令\n",
			[]string{"zh-TW lesson 02-gate.md translates no lesson"}},
		{"a translation with no title", "zh-TW/02-apiserver.md", "## 命令\n",
			[]string{"the zh-TW lessons", "02-apiserver.md", "no lesson title"}},
		{"a translation whose number is not its file's", "zh-TW/02-apiserver.md", "# 12 — 關卡\n\n## 命令\n",
			[]string{"its title says lesson 12, its file name 02"}},
		{"a translation with an unclosed block", "zh-TW/02-apiserver.md", "# 02 — 關卡\n\n" + fence + "sh\necho\n",
			[]string{"02-apiserver.md", "never closed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := translated()
			en, err := lesson.ListFS(fsys)
			if err != nil {
				t.Fatal(err)
			}
			fsys[tt.file] = &fstest.MapFile{Data: []byte(tt.text)}
			got, err := lesson.Translate(fsys, en, lesson.TraditionalChinese)
			if err == nil {
				t.Fatalf("Translate with %s: no error, %d lessons", tt.file, len(got))
			}
			for _, want := range tt.wants {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Translate with %s: %q lacks %q", tt.file, err, want)
				}
			}
		})
	}
}
