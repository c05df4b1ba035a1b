package kubejob

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"temper.codes/temper-train/internal/kube"
)

// Errors Run, Create and Wait return, for errors.Is; the messages say what
// happened in one line.
var (
	ErrForbidden   = errors.New("forbidden")
	ErrNoPod       = errors.New("target pod not found")
	ErrUnscheduled = errors.New("target pod not scheduled")
	ErrFailed      = errors.New("job failed")
	ErrDeadline    = errors.New("job deadline exceeded")
	ErrPodDeleted  = errors.New("target pod deleted")
	ErrJobDeleted  = errors.New("job deleted")
)

// runError is an error of one of the kinds above whose message is written
// in full for the user: wrapping with "%w: ..." would start every message
// with the sentinel's bare text.
type runError struct {
	kind error
	msg  string
}

func (e *runError) Error() string { return e.msg }
func (e *runError) Unwrap() error { return e.kind }

// newError formats a runError of kind.
func newError(kind error, format string, a ...any) error {
	return &runError{kind: kind, msg: fmt.Sprintf(format, a...)}
}

// Client talks to one API server for the job command.
type Client struct {
	core, batch, rbac, authz *rest.RESTClient
	host                     string
	source                   kube.Source
}

// NewClient makes the REST clients for core, batch, rbac and authorization.
func NewClient(cfg *rest.Config, src kube.Source) (*Client, error) {
	c := &Client{host: cfg.Host, source: src}
	var err error
	if c.core, err = kube.Client(cfg, corev1.SchemeGroupVersion, corev1.AddToScheme); err != nil {
		return nil, err
	}
	if c.batch, err = kube.Client(cfg, batchv1.SchemeGroupVersion, batchv1.AddToScheme); err != nil {
		return nil, err
	}
	if c.rbac, err = kube.Client(cfg, rbacv1.SchemeGroupVersion, rbacv1.AddToScheme); err != nil {
		return nil, err
	}
	if c.authz, err = kube.Client(cfg, authorizationv1.SchemeGroupVersion, authorizationv1.AddToScheme); err != nil {
		return nil, err
	}
	return c, nil
}

// Permission is one thing the caller must be allowed to do.
type Permission struct {
	Verb, Group, Resource, Namespace, Name string
}

func (p Permission) resource() string {
	if p.Group == "" {
		return p.Resource
	}
	return p.Resource + "." + p.Group
}

// ForbiddenError: the caller lacks a permission.
type ForbiddenError struct {
	Permission
	Who string // where the credentials come from
}

func (e *ForbiddenError) Error() string {
	what := e.resource()
	if e.Name != "" {
		what += " " + e.Name
	}
	return fmt.Sprintf("cannot %s %s in namespace %q: ask your admin for a Role granting %q on %s there to the identity from %s (check: kubectl auth can-i %s %s -n %s)",
		e.Verb, what, e.Namespace, e.Verb, e.resource(), e.Who, e.Verb, e.resource(), e.Namespace)
}

func (e *ForbiddenError) Is(target error) bool { return target == ErrForbidden }

// Permissions lists what the caller needs to create the objects (and,
// with wait, to follow the run and read its outputs). Creating a Role or
// RoleBinding also takes holding what it grants, so those are listed too.
func Permissions(o *Objects, wait bool) []Permission {
	ns, podNS, pod := o.Job.Namespace, "", ""
	for _, r := range o.Roles {
		for _, rule := range r.Rules {
			if rule.Resources[0] == "pods" {
				podNS, pod = r.Namespace, rule.ResourceNames[0]
			}
		}
	}
	ps := []Permission{
		{"get", "", "pods", podNS, pod},
		{"create", "batch", "jobs", ns, ""},
		{"patch", "batch", "jobs", ns, o.Job.Name},
		{"create", "", "serviceaccounts", ns, ""},
		{"create", "", "configmaps", ns, ""},
		{"get", "", "configmaps", ns, o.ConfigMap.Name},
		{"update", "", "configmaps", ns, o.ConfigMap.Name},
	}
	for _, r := range o.Roles {
		ps = append(ps, Permission{"create", rbacv1.GroupName, "roles", r.Namespace, ""},
			Permission{"create", rbacv1.GroupName, "rolebindings", r.Namespace, ""})
	}
	if wait {
		ps = append(ps, Permission{"get", "batch", "jobs", ns, o.Job.Name},
			Permission{"watch", "batch", "jobs", ns, ""}, Permission{"watch", "", "pods", podNS, ""})
	}
	return ps
}

// Check asks the API server (SelfSubjectAccessReview) whether the caller
// has every permission, before anything is created, and names the first
// one missing.
func (c *Client) Check(ctx context.Context, ps []Permission) error {
	for _, p := range ps {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: p.Namespace, Verb: p.Verb, Group: p.Group, Resource: p.Resource, Name: p.Name},
		}}
		res := &authorizationv1.SelfSubjectAccessReview{}
		if err := c.authz.Post().Resource("selfsubjectaccessreviews").Body(review).Do(ctx).Into(res); err != nil {
			return c.apiError(err, Permission{"create", "authorization.k8s.io", "selfsubjectaccessreviews", "", ""})
		}
		if !res.Status.Allowed {
			return &ForbiddenError{Permission: p, Who: c.source.String()}
		}
	}
	return nil
}

// apiError turns an API error into one line: a ForbiddenError for p when
// the server refused for lack of RBAC permission.
func (c *Client) apiError(err error, p Permission) error {
	switch {
	case apierrors.IsForbidden(err):
		return &ForbiddenError{Permission: p, Who: c.source.String()}
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("API server %s rejected the credentials from %s (expired or wrong token or certificate?)", c.host, c.source)
	}
	what := p.resource()
	if p.Name != "" {
		what += " " + p.Name
	}
	return fmt.Errorf("%s %s in namespace %q (API server %s): %w", p.Verb, what, p.Namespace, c.host, err)
}

// Pod reads the target pod.
func (c *Client) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := c.core.Get().Namespace(namespace).Resource("pods").Name(name).Do(ctx).Into(pod)
	if apierrors.IsNotFound(err) {
		return nil, newError(ErrNoPod, "pod %s/%s not found (API server %s; check with kubectl get pods -n %s)", namespace, name, c.host, namespace)
	}
	if err != nil {
		return nil, c.apiError(err, Permission{"get", "", "pods", namespace, name})
	}
	if pod.Spec.NodeName == "" {
		return nil, newError(ErrUnscheduled, "pod %s/%s is not scheduled to a node yet (phase %s): run the job once it runs", namespace, name, pod.Status.Phase)
	}
	return pod, nil
}

// Create creates the run's objects: the Job suspended, then the
// ServiceAccount, ConfigMap, Roles and RoleBindings (those in the Job's
// namespace owned by the Job, so they go with it), then resumes the Job.
// If a step fails, what was created is deleted again.
func (c *Client) Create(ctx context.Context, o *Objects) (err error) {
	var undo []func()
	defer func() {
		if err != nil {
			// A fresh context: the caller's may be what was cancelled.
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	create := func(rc *rest.RESTClient, p Permission, obj, into runtime.Object) error {
		if err := rc.Post().Namespace(p.Namespace).Resource(p.Resource).Body(obj).Do(ctx).Into(into); err != nil {
			return c.apiError(err, p)
		}
		name := into.(metav1.Object).GetName()
		undo = append(undo, func() {
			dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// Background: the Job's dependents (none yet, with
			// luck) go too, and nothing is left orphaned.
			policy := metav1.DeletePropagationBackground
			_ = rc.Delete().Namespace(p.Namespace).Resource(p.Resource).Name(name).
				Body(&metav1.DeleteOptions{PropagationPolicy: &policy}).Do(dctx).Error()
		})
		return nil
	}
	ns := o.Job.Namespace
	job := &batchv1.Job{}
	if err := create(c.batch, Permission{"create", "batch", "jobs", ns, ""}, o.Job, job); err != nil {
		return err
	}
	owner := []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID}}
	own := func(m *metav1.ObjectMeta) {
		if m.Namespace == ns {
			m.OwnerReferences = owner
		}
	}
	own(&o.ServiceAccount.ObjectMeta)
	if err := create(c.core, Permission{"create", "", "serviceaccounts", ns, ""}, o.ServiceAccount, &corev1.ServiceAccount{}); err != nil {
		return err
	}
	own(&o.ConfigMap.ObjectMeta)
	if err := create(c.core, Permission{"create", "", "configmaps", ns, ""}, o.ConfigMap, &corev1.ConfigMap{}); err != nil {
		return err
	}
	for i := range o.Roles {
		own(&o.Roles[i].ObjectMeta)
		if err := create(c.rbac, Permission{"create", rbacv1.GroupName, "roles", o.Roles[i].Namespace, ""}, o.Roles[i], &rbacv1.Role{}); err != nil {
			return err
		}
		own(&o.RoleBindings[i].ObjectMeta)
		if err := create(c.rbac, Permission{"create", rbacv1.GroupName, "rolebindings", o.RoleBindings[i].Namespace, ""}, o.RoleBindings[i], &rbacv1.RoleBinding{}); err != nil {
			return err
		}
	}
	patch := []byte(`{"spec":{"suspend":false}}`)
	if err := c.batch.Patch(types.MergePatchType).Namespace(ns).Resource("jobs").Name(job.Name).Body(patch).Do(ctx).Into(job); err != nil {
		return c.apiError(err, Permission{"patch", "batch", "jobs", ns, job.Name})
	}
	o.Job = job
	return nil
}

// Cleanup deletes what the Job does not own: the Role and RoleBinding in
// the pod's namespace when it differs from the Job's. Wait calls it when
// the run ends.
func (c *Client) Cleanup(ctx context.Context, o *Objects) error {
	var errs []error
	for i := range o.Roles {
		if o.Roles[i].Namespace == o.Job.Namespace {
			continue
		}
		for _, r := range []struct {
			res  string
			name string
		}{{"rolebindings", o.RoleBindings[i].Name}, {"roles", o.Roles[i].Name}} {
			err := c.rbac.Delete().Namespace(o.Roles[i].Namespace).Resource(r.res).Name(r.name).Do(ctx).Error()
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, c.apiError(err, Permission{"delete", rbacv1.GroupName, r.res, o.Roles[i].Namespace, r.name}))
			}
		}
	}
	return errors.Join(errs...)
}

// ConfigMap reads the run's ConfigMap.
func (c *Client) ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	if err := c.core.Get().Namespace(namespace).Resource("configmaps").Name(name).Do(ctx).Into(cm); err != nil {
		return nil, c.apiError(err, Permission{"get", "", "configmaps", namespace, name})
	}
	return cm, nil
}

// Publish writes the outputs into the run's ConfigMap, retrying when
// someone else updated it in between.
func (c *Client) Publish(ctx context.Context, namespace, name, status string, outs []Output) error {
	for attempt := 0; ; attempt++ {
		cm, err := c.ConfigMap(ctx, namespace, name)
		if err != nil {
			return err
		}
		if err := Fill(cm, status, outs, MaxConfigMapBytes); err != nil {
			return err
		}
		err = c.core.Put().Namespace(namespace).Resource("configmaps").Name(name).Body(cm).Do(ctx).Error()
		if err == nil || !apierrors.IsConflict(err) || attempt == 4 {
			if err != nil {
				return c.apiError(err, Permission{"update", "", "configmaps", namespace, name})
			}
			return nil
		}
	}
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
