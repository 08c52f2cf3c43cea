package etcd

import (
	"context"
	"strings"
	"testing"
)

func TestConfig_Args(t *testing.T) {
	c := Config{Name: "podlab", DataDir: "/s/etcd/member-data", Host: "127.0.0.1", ClientPort: 2379}
	got := strings.Join(c.Args(), " ")
	for _, want := range []string{
		"--data-dir /s/etcd/member-data",
		"--listen-client-urls http://127.0.0.1:2379",
		"--listen-peer-urls http://127.0.0.1:2380",
		"--initial-cluster podlab=http://127.0.0.1:2380",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args %q lack %q", got, want)
		}
	}
	if c.ClientURL() != "http://127.0.0.1:2379" {
		t.Errorf("ClientURL = %s", c.ClientURL())
	}
}

// TestConfig_Args_AlsoOn: clients on loopback and on the lab network's
// gateway, peers on loopback only.
func TestConfig_Args_AlsoOn(t *testing.T) {
	c := Config{Name: "podlab", DataDir: "/s/etcd/member-data", Host: "127.0.0.1", ClientPort: 2379, AlsoOn: []string{"172.20.5.1"}}
	got := strings.Join(c.Args(), " ")
	for _, want := range []string{
		"--listen-client-urls http://127.0.0.1:2379,http://172.20.5.1:2379 ",
		"--advertise-client-urls http://127.0.0.1:2379,http://172.20.5.1:2379 ",
		"--listen-peer-urls http://127.0.0.1:2380 ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args %q lack %q", got, want)
		}
	}
	if urls := strings.Join(c.ClientURLs(), " "); urls != "http://127.0.0.1:2379 http://172.20.5.1:2379" {
		t.Errorf("ClientURLs = %s", urls)
	}
}

func TestConfig_BadInput(t *testing.T) {
	good := Config{Name: "podlab", DataDir: "/s/etcd/member-data", Host: "127.0.0.1", ClientPort: 2379}
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"relative data dir", func(c *Config) { c.DataDir = "data" }, "absolute path"},
		{"port 0", func(c *Config) { c.ClientPort = 0 }, "not in 1-65534"},
		{"last port", func(c *Config) { c.ClientPort = 65535 }, "peer port"},
		{"no name", func(c *Config) { c.Name = "" }, "member name"},
		{"no host", func(c *Config) { c.Host = "" }, "address"},
		{"another address that is not one", func(c *Config) { c.AlsoOn = []string{"lab-gateway"} }, `client address "lab-gateway" is not an IP address`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			_, err := c.Command(context.Background(), "/bin/true")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
