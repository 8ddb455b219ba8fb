package relay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseFlag(t *testing.T) {
	for _, tt := range []struct {
		in     string
		url    string
		models []string
	}{
		{"http://10.0.0.5:8080", "http://10.0.0.5:8080", nil},
		{"gpt-x,gpt-y=https://api.example.com/v1", "https://api.example.com/v1", []string{"gpt-x", "gpt-y"}},
		{"http://h/?a=b", "http://h/?a=b", nil}, // "=" after the scheme is the URL's
	} {
		u, err := ParseFlag(tt.in)
		if err != nil || u.URL != tt.url || strings.Join(u.Models, ",") != strings.Join(tt.models, ",") {
			t.Errorf("ParseFlag(%q) = %+v, %v", tt.in, u, err)
		}
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "relay.json")
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("RELAY_TEST_KEY", "sk-test")
	ups, err := LoadFile(write(`{"upstreams":[{"url":"https://api.example.com","models":["a"],"api_key_env":"RELAY_TEST_KEY","stall_timeout":"20s","retries":0}]}`))
	if err != nil {
		t.Fatal(err)
	}
	u := ups[0].WithDefaults(Defaults)
	if u.APIKey != "sk-test" || u.Stall != 20*time.Second || u.Connect != Defaults.Connect || u.Retries != 0 {
		t.Errorf("loaded %+v: want the key from the environment, the file's stall, the default connect, retries 0 kept", u)
	}
	for _, bad := range []string{
		`{"upstreams":[{"url":"http://h","stall_timout":"20s"}]}`, // misspelt: must not fall back to the default
		`{"upstreams":[{"url":"http://h","api_key_env":"RELAY_TEST_UNSET"}]}`,
		`{"upstreams":[{"url":"http://h","connect_timeout":"soon"}]}`,
		`{"upstreams":[]}`,
	} {
		if _, err := LoadFile(write(bad)); err == nil {
			t.Errorf("LoadFile accepted %s", bad)
		}
	}
	ftp := Upstream{URL: "ftp://h"}.WithDefaults(Defaults)
	if err := ftp.validate(); err == nil {
		t.Error("an ftp URL was accepted")
	}
}
