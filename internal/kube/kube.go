// Package kube loads Kubernetes client credentials the way kubectl does
// (plus the in-cluster service account) and makes REST clients for single
// API groups. target (--pod) and kubejob (temper-train job) share it,
// so both pick credentials by one rule.
//
// The clients are rest.RESTClients over a scheme that holds only the group
// asked for. The generated clientset (k8s.io/client-go/kubernetes) would
// make the same requests, but linking it registers every Kubernetes API
// group at init and pulls in the discovery client's OpenAPI models: ~10 ms on
// every start of the binary, which mostly never talks to an API server.
package kube

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ErrNoCredentials: there is no kubeconfig and no in-cluster service
// account.
var ErrNoCredentials = errors.New("no Kubernetes credentials: pass a kubeconfig, set KUBECONFIG, create ~/.kube/config, or run in a pod with a service account")

// Source says where the API server credentials come from: a kubeconfig
// (one path, or the list in $KUBECONFIG), or the in-cluster service account.
type Source struct {
	Kubeconfigs []string // empty for in-cluster
	InCluster   bool
}

func (s Source) String() string {
	if s.InCluster {
		return "the in-cluster service account"
	}
	return "kubeconfig " + strings.Join(s.Kubeconfigs, string(filepath.ListSeparator))
}

// ChooseSource picks the credentials the way kubectl would, plus the
// in-cluster fallback: the explicit kubeconfig, else $KUBECONFIG (a list of
// paths), else ~/.kube/config if it exists, else the pod's service account
// when KUBERNETES_SERVICE_HOST is set. getenv and exists are os.Getenv and a
// file-exists check outside tests.
func ChooseSource(explicit string, getenv func(string) string, home string, exists func(string) bool) (Source, error) {
	if explicit != "" {
		return Source{Kubeconfigs: []string{explicit}}, nil
	}
	if env := getenv("KUBECONFIG"); env != "" {
		var paths []string
		for _, p := range filepath.SplitList(env) {
			if p != "" {
				paths = append(paths, p)
			}
		}
		if len(paths) > 0 {
			return Source{Kubeconfigs: paths}, nil
		}
	}
	if home != "" {
		if p := filepath.Join(home, ".kube", "config"); exists(p) {
			return Source{Kubeconfigs: []string{p}}, nil
		}
	}
	if getenv("KUBERNETES_SERVICE_HOST") != "" {
		return Source{InCluster: true}, nil
	}
	return Source{}, ErrNoCredentials
}

// DefaultSource is ChooseSource on this process's environment and home.
func DefaultSource(explicit string) (Source, error) {
	home, _ := os.UserHomeDir()
	return ChooseSource(explicit, os.Getenv, home, func(p string) bool {
		_, err := os.Stat(p)
		return err == nil
	})
}

// Config loads the client configuration from src.
func Config(src Source) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if src.InCluster {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = loader(src).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("load Kubernetes client configuration from %s: %w", src, err)
	}
	cfg.UserAgent = "temper-train"
	if cfg.Timeout == 0 {
		// A per-request bound for callers whose ctx has none: an API
		// server that does not answer must not hang the caller. Watches
		// set their own timeout.
		cfg.Timeout = 30 * time.Second
	}
	return cfg, nil
}

// loader reads the kubeconfigs of src.
func loader(src Source) clientcmd.ClientConfig {
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: src.Kubeconfigs}
	if len(src.Kubeconfigs) == 1 {
		// An explicit path must exist; Precedence entries may be missing.
		rules = &clientcmd.ClientConfigLoadingRules{ExplicitPath: src.Kubeconfigs[0]}
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
}

// InClusterNamespace is the namespace of the pod this process runs in, from
// its service account's files; "" outside a pod.
func InClusterNamespace() string {
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Client returns a REST client for one API group version, whose scheme
// holds that group's types only (addToScheme registers them). core/v1 is
// served under /api, every other group under /apis. Registering a group
// also adds the meta types (Status, WatchEvent, the option types), which
// lets the client decode the API server's Status responses into
// *apierrors.StatusError as the clientset does.
func Client(cfg *rest.Config, gv schema.GroupVersion, addToScheme func(*runtime.Scheme) error) (*rest.RESTClient, error) {
	scheme := runtime.NewScheme()
	if err := addToScheme(scheme); err != nil {
		return nil, err
	}
	c := *cfg
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	if gv.Group == "" {
		c.APIPath = "/api"
	}
	c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, serializer.NewCodecFactory(scheme)).WithoutConversion()
	return rest.RESTClientFor(&c)
}
