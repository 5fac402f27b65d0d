package backend

import (
	"flag"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

func TestResolveEtcd(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want []string // endpoints; nil: a usage error
		err  string
	}{
		{args: []string{"--etcd", "127.0.0.1:2379"}, want: []string{"127.0.0.1:2379"}},
		{args: []string{"--etcd", "a:1, b:2 ,c:3"}, want: []string{"a:1", "b:2", "c:3"}},
		{env: map[string]string{EnvEtcd: "h:2379"}, want: []string{"h:2379"}},
		{args: []string{"--etcd", "h"}, err: "not host:port"},
		{args: []string{"--etcd", "h:x"}, err: "not a number"},
		{args: []string{"--etcd", "h:70000"}, err: "not a number"},
		{args: []string{"--etcd", "h:1,"}, err: "empty endpoint"},
		{args: []string{"--etcd", "https://h:1"}, err: "without a scheme"},
		{args: []string{"--etcd", "h:1", "--zk", "h:2"}, err: "more than one"},
		{env: map[string]string{EnvEtcd: "h:1", EnvZK: "h:2"}, err: "more than one"},
	} {
		var f Flags
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		f.Register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		spec, err := f.Resolve(func(k string) string { return tc.env[k] })
		if tc.want == nil {
			if err == nil || !cmdutil.IsUsage(err) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v %v: %v; want a usage error saying %q", tc.args, tc.env, err, tc.err)
			}
			continue
		}
		if err != nil || spec.Kind() != "etcd" || strings.Join(spec.Etcd, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%v %v: %+v, %v; want etcd %v", tc.args, tc.env, spec.Etcd, err, tc.want)
		}
	}
}

func TestEtcdNames(t *testing.T) {
	for _, bad := range []string{"/", "x/", strings.Repeat("x", MaxEtcdName+1)} {
		if err := CheckName("etcd", bad); err == nil || !cmdutil.IsUsage(err) {
			t.Errorf("CheckName(etcd, %.20q) = %v; want a usage error", bad, err)
		}
	}
	for _, good := range []string{"ok/name", "/locks/x", strings.Repeat("x", MaxEtcdName)} {
		if err := CheckName("etcd", good); err != nil {
			t.Errorf("CheckName(etcd, %.20q) = %v", good, err)
		}
	}
	if err := CheckName("etcd", "ok/name"); err != nil {
		t.Errorf("CheckName(etcd, ok/name) = %v", err)
	}
}
