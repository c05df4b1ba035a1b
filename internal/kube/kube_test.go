package kube

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
)

func TestChooseSource(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	homeConfig := filepath.Join("/home/u", ".kube", "config")
	exists := func(p string) bool { return p == homeConfig }
	for _, tc := range []struct {
		name     string
		explicit string
		getenv   func(string) string
		home     string
		want     Source
		wantErr  bool
	}{
		{name: "explicit wins", explicit: "/k", getenv: env("KUBECONFIG", "/e", "KUBERNETES_SERVICE_HOST", "10.0.0.1"), home: "/home/u", want: Source{Kubeconfigs: []string{"/k"}}},
		{name: "KUBECONFIG list", getenv: env("KUBECONFIG", "/a::/b"), home: "/home/u", want: Source{Kubeconfigs: []string{"/a", "/b"}}},
		{name: "home config", getenv: env("KUBERNETES_SERVICE_HOST", "10.0.0.1"), home: "/home/u", want: Source{Kubeconfigs: []string{homeConfig}}},
		{name: "in cluster", getenv: env("KUBERNETES_SERVICE_HOST", "10.0.0.1"), home: "/home/nobody", want: Source{InCluster: true}},
		{name: "nothing", getenv: env(), home: "", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChooseSource(tc.explicit, tc.getenv, tc.home, exists)
			if tc.wantErr {
				if !errors.Is(err, ErrNoCredentials) {
					t.Errorf("ChooseSource = %v, want ErrNoCredentials", err)
				}
				return
			}
			if err != nil || got.InCluster != tc.want.InCluster || !slices.Equal(got.Kubeconfigs, tc.want.Kubeconfigs) {
				t.Errorf("ChooseSource = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
